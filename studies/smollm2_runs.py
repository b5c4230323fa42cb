"""Every finished job of the SmolLM2-135M learning studies (studies/smollm2_study.sh), one row each: the README's table.

Why: those studies run for days in pieces on several machines, each folder one base and one learning rate, and their
figures were quoted only in prose. This reads the cached jobs the studies commit (OUT/runs/*.json, beside
OUT/settings.json) and prints one markdown table: per study its base's dtype and weights fingerprint and the lr; per
job its unseen-panel success (no skills), the difference to GRPO's job of the same seed in the same study, the games
only it / only that GRPO job won with the sign test's p (studies/learning_report.py's per_game), its agreement with
the env expert's next command over the panel's steps (Agree %) and over the steps where that command is a 'take'
(on takes: some jobs stopped taking, T's more than GRPO's, docs/STUDIES.md), its training wins and its training and play
seconds.
A study's jobs share one base and one play seed per seed, so only rows of one study and one seed are paired; across
studies the bases differ (another dtype or another CPU's rounding).

    python -m studies.smollm2_runs [STUDY_DIR ...]     # default: studies/results/smollm2_study*/
    python -m studies.smollm2_runs --baseline base     # each job against the base's play of its seed instead of
                                                     # GRPO's: how far six iterations moved it from where it began
    python -m studies.smollm2_runs --bases             # instead: one seed's base plays across studies whose warm
                                                     # starts differ (e.g. rebuilt on another CPU), game by game
    python -m studies.smollm2_runs --pooled            # instead: per arm, dtype and lr, every paired job's gap to
                                                     # its baseline across studies, their mean and the pooled games
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from studies.comparisons import _pts, short_label
from studies.learning_report import per_game, sign_test_p, won_games

RESULTS = Path(__file__).resolve().parent / "results"
BASE = "base (no RL)"


def jobs_of(study: Path) -> list[dict]:
    """The study's finished jobs: arm x seed runs ({variant, seed, iters, train_s, eval_s, table}) and the base's
    plays (runs/base-sN.json, a bare table). Run folders and the headroom record are not jobs."""
    out = []
    for f in sorted((study / "runs").glob("*.json")):
        rec = json.loads(f.read_text())
        m = re.fullmatch(r"base-s(\d+)", f.stem)
        if m:
            out.append({"variant": BASE, "seed": int(m.group(1)), "table": rec})
        elif "variant" in rec:
            out.append(rec)
    order = {BASE: 0, "grpo": 1}
    return sorted(out, key=lambda r: (r["seed"], order.get(r["variant"], 2), r["variant"]))


def row(study: Path, settings: dict, job: dict, against: dict | None) -> dict:
    """One job's figures; `against` is the job it is set against: the same study's job of the same seed of the baseline
    arm (GRPO, or the base's play), None where it has none."""
    t = job["table"]
    n, pct = t["n"]["All"], t["success_pct"]["All"]
    won = won_games(t)[0]
    arm = job["variant"] if job["variant"] in (BASE, "grpo") else short_label(job["variant"])
    r = {"study": study.name, "weights": f"{settings['dtype']} {settings['base_weights'].split(':')[-1][:8]}",
         "lr": settings["lr"], "arm": arm,
         "seed": job["seed"], "all_pct": pct, "won": won, "n": n, "agree": t.get("expert_agreement_pct"),
         "take_agree": (t.get("expert_agreement_by_kind") or {}).get("take"),  # {pct, steps}; older plays: None
         "minus": None, "games": None,
         "train_wins": None, "train_s": job.get("train_s"), "eval_s": job.get("eval_s")}
    if job.get("iters"):
        per_iter = settings["group_size"] * settings["tasks_per_iter"]
        wins = sum(round(i["train_success"] * per_iter) for i in job["iters"])  # success is a share of per_iter
        r["train_wins"] = (wins, per_iter * len(job["iters"]))
    if against is not None and job is not against:
        r["minus"] = pct - against["table"]["success_pct"]["All"]
        g = per_game([job, against], job["variant"], against["variant"]).get(str(job["seed"]))  # {}: not told apart
        if g:
            r["games"] = (g["only_variant"], g["only_baseline"], g["p_sign"])
    return r


def rows_of(study: Path, baseline: str = "grpo") -> list[dict]:
    """The study's rows, each job set against the same seed's job of `baseline` ("grpo" or BASE)."""
    settings = json.loads((study / "settings.json").read_text())
    jobs = jobs_of(study)
    against = {j["seed"]: j for j in jobs if j["variant"] == baseline}
    return [row(study, settings, j, against.get(j["seed"])) for j in jobs]


def table(rows: list[dict], baseline: str = "grpo") -> str:
    name = "GRPO" if baseline == "grpo" else "base"
    lines = [f"| study | base weights | lr | arm | seed | unseen All % (won) | minus {name} "
             f"| games only arm / only {name} (p) | Agree % | on takes % (steps) | training wins | train s | play s |",
             "|---" * 13 + "|"]
    for r in rows:
        minus = "-" if r["minus"] is None else _pts(r["minus"])
        games = "-" if r["games"] is None else f"{r['games'][0]} / {r['games'][1]} ({r['games'][2]:.2g})"
        agree = "-" if r["agree"] is None else f"{r['agree']:.1f}"
        takes = "-" if r["take_agree"] is None else f"{r['take_agree']['pct']:.1f} ({r['take_agree']['steps']})"
        wins = "-" if r["train_wins"] is None else f"{r['train_wins'][0]} / {r['train_wins'][1]}"
        secs = ["-" if s is None else f"{s:,.0f}" for s in (r["train_s"], r["eval_s"])]
        lines.append(f"| {r['study']} | {r['weights']} | {r['lr']:g} | {r['arm']} | {r['seed']} | "
                     f"{r['all_pct']:.1f} ({r['won']} / {r['n']}) | {minus} | {games} | {agree} | {takes} | {wins} | "
                     f"{secs[0]} | {secs[1]} |")
    return "\n".join(lines)


# What decides a base's play besides its weights: two studies' base plays of one seed are set side by side only where
# these agree (the play seed is the job's seed).
PLAY_SETTINGS = ("eval_panel", "eval_episodes", "eval_temperature", "eval_max_steps", "max_new_tokens",
                 "max_prompt_len", "history_length", "batch_envs", "dtype", "env_config")


def base_pairs(studies: list[Path]) -> list[dict]:
    """Per seed, each two studies whose base plays used the same play settings but other warm-start weights (the
    same recipe rebuilt on CPUs that round differently): both success counts and, where both recorded which games
    they won, the games only the first / only the second won with the sign test's p. Why: it says whether a warm
    start rebuilt on another CPU plays like the study's own, i.e. how much a CPU's rounding moves a base."""
    bases = []
    for study in studies:
        settings = json.loads((study / "settings.json").read_text())
        bases += [(study, settings, j) for j in jobs_of(study) if j["variant"] == BASE]
    out = []
    for i, (sa, a_set, a) in enumerate(bases):
        for sb, b_set, b in bases[i + 1:]:
            same_play = all(a_set.get(k) == b_set.get(k) for k in PLAY_SETTINGS)
            if a["seed"] != b["seed"] or not same_play or a_set["base_weights"] == b_set["base_weights"]:
                continue
            ra, rb = row(sa, a_set, a, None), row(sb, b_set, b, None)
            pair = {"seed": a["seed"], "first": f"{sa.name} {ra['weights']}", "second": f"{sb.name} {rb['weights']}",
                    "won": (ra["won"], rb["won"]), "n": (ra["n"], rb["n"]), "games": None}
            g = per_game([{**a, "variant": "first"}, {**b, "variant": "second"}], "first", "second")
            if g:
                x = g[str(a["seed"])]
                pair["games"] = (x["only_variant"], x["only_baseline"], x["p_sign"], x["games"])
            out.append(pair)
    return out


def bases_text(pairs: list[dict]) -> str:
    if not pairs:
        return "no seed has base plays in two studies with the same play settings and other warm-start weights"
    lines = []
    for p in pairs:
        games = ("" if p["games"] is None else
                 f"; games only first / only second: {p['games'][0]} / {p['games'][1]} (p {p['games'][2]:.2g}), "
                 f"the other {p['games'][3] - p['games'][0] - p['games'][1]} of {p['games'][3]} alike")
        lines.append(f"seed {p['seed']}: {p['first']} won {p['won'][0]} / {p['n'][0]}, {p['second']} won "
                     f"{p['won'][1]} / {p['n'][1]}{games}")
    return "\n".join(lines)


def pooled(rows: list[dict]) -> list[dict]:
    """Per (arm, dtype, lr): every row set against a baseline job (its study's and seed's), the mean of their gaps and
    the games only the arm / only the baseline won summed over those pairs, with the sign test's p on the sums. Why:
    one pair sits inside one play's noise; pairs on other seeds and bases are independent, so their discordant games
    pool (rows whose games cannot be told apart, learning_report.discordant, count in the mean only)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["minus"] is not None:
            groups.setdefault((r["arm"], r["weights"].split()[0], r["lr"]), []).append(r)
    out = []
    for (arm, dtype, lr), rs in groups.items():
        with_games = [r for r in rs if r["games"] is not None]
        b, c = sum(r["games"][0] for r in with_games), sum(r["games"][1] for r in with_games)
        out.append({"arm": arm, "dtype": dtype, "lr": lr,
                    "pairs": [(r["study"], r["seed"], r["minus"], r["games"]) for r in rs],
                    "mean": sum(r["minus"] for r in rs) / len(rs),
                    "games": (b, c, sign_test_p(b, c), len(with_games)) if with_games else None})
    return out


def pooled_text(groups: list[dict], baseline: str = "grpo") -> str:
    name = "GRPO" if baseline == "grpo" else "base"
    if not groups:
        return f"no job is set against a {name} job of its study and seed"
    lines = []
    for g in groups:
        pairs = ", ".join(f"{study} s{seed} {_pts(m)} " + (f"({x[0]} / {x[1]})" if x else "(games not told apart)")
                          for study, seed, m, x in g["pairs"])
        games = ("" if g["games"] is None else
                 f"; games only {g['arm']} / only {name}, summed over the {g['games'][3]} told apart: "
                 f"{g['games'][0]} / {g['games'][1]} (p {g['games'][2]:.2g})")
        lines.append(f"{g['arm']} - {name}, {g['dtype']} lr {g['lr']:g}: mean {_pts(g['mean'])} over "
                     f"{len(g['pairs'])} pairs ({pairs}){games}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("studies", nargs="*", type=Path, help="study folders (default: studies/results/smollm2_study*/)")
    p.add_argument("--baseline", choices=("grpo", "base"), default="grpo",
                   help="the job of the same study and seed each row is set against (default: GRPO's, the README's)")
    p.add_argument("--bases", action="store_true",
                   help="instead of the table: base plays of one seed in studies whose warm starts differ")
    p.add_argument("--pooled", action="store_true",
                   help="instead of the table: per arm, dtype and lr, the pairs' gaps to the baseline, their mean "
                        "and the games pooled over them")
    args = p.parse_args(argv)
    studies = args.studies or sorted(d for d in RESULTS.glob("smollm2_study*") if (d / "settings.json").is_file())
    if not studies:
        p.error(f"no study folders (looked for {RESULTS}/smollm2_study*/settings.json)")
    if args.bases:
        print(bases_text(base_pairs(studies)))
        return 0
    baseline = BASE if args.baseline == "base" else "grpo"
    rows = [r for s in studies for r in rows_of(s, baseline)]
    print(pooled_text(pooled(rows), baseline) if args.pooled else table(rows, baseline))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
