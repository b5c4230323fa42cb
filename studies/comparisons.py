"""Every OPID-vs-GRPO comparison in studies/results/, one line per arm: the README's ledger of issue 13.

Why: each learning study wrote its own results file (studies/learning.py --results), and the README quotes them
in a dozen paragraphs. This reads them all and prints one markdown table: the base, its skill headroom where
the study measured it (student and oracle-skill teacher, All %), the base's and GRPO's All % (no skills), and
per arm its All %, the paired difference to GRPO (mean and per seed: same seed, same base) and the difference
in agreement with the env expert's next command.

    python -m studies.comparisons [RESULTS_FILE ...]     # default: studies/results/learning*.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
PROTOCOL_ITERS = 6  # studies/learning.py's default budget; an arm trained longer says so in its label
UNSEEN = "alfworld/valid_unseen@v1"  # the panel; a study scored elsewhere says where in its file cell
# T, the teacher-samples arm most studies ran, written out in every variant name: shortened for the table.
T_SETTINGS = "w_ep=0+w_step=0.3+analyzer.on_plan_step_skills=3+normalize_teacher_adv=true+teacher_sample_adv_weight=1"
_SHORT = (("opid:" + T_SETTINGS, "T"), ("opid_shuffled:" + T_SETTINGS, "T+shuffle_skills=true"),
          ("analyzer.on_plan_step_skills", "on_plan"), ("normalize_teacher_adv=true", "centred"),
          ("teacher_sample_adv_weight", "w_T"), ("teacher_sample_sft_coeff", "c_T"),
          ("teacher_anchor_coeff", "c_A"), ("analyzer.quote_sampled=false", "unquoted"),
          ("shuffle_skills=true", "shuffle_skills=true"))  # as itself: short_run_dir restores its '+'


def short_label(variant: str) -> str:
    if variant == "opid":
        return "opid (reference weights, 0.001 each)"
    for long, short in _SHORT:
        variant = variant.replace(long, short)
    return variant


def short_run_dir(name: str) -> str:
    """A studies/learning.py run folder's name ('<variant with : and + as _>-s<seed>') shortened as short_label
    shortens its variant: the label of a job still training, before its record is written."""
    for long, short in _SHORT:  # a whole arm ('opid:' + T) as itself, a setting after the '+' that became '_'
        whole = ":" in long
        long = long.replace(":", "_").replace("+", "_")
        name = name.replace(long, short) if whole else name.replace("_" + long, "+" + short)
    return name


def _base_of(command: str) -> str:
    m = re.search(r"--base (\S+)", command or "")
    return "/".join(Path(m.group(1)).parts[-2:]) if m else "?"


def _iters_of(command: str) -> int:
    m = re.search(r"--iters (\d+)", command or "")
    return int(m.group(1)) if m else PROTOCOL_ITERS


def _all(per_seed: dict, variant: str) -> dict[str, float]:
    return {s: t["All"] for s, t in per_seed.get(variant, {}).items() if t.get("All") is not None}


def rows_of(name: str, res: dict) -> list[dict]:
    """One row per non-GRPO arm of one results file; [] where the study ran no GRPO arm."""
    per_seed, agree = res.get("per_seed", {}), res.get("per_seed_agreement_pct", {})
    panel = res.get("eval_panel") or "?"
    grpo, base = _all(per_seed, "grpo"), _all(per_seed, "base (no RL)")
    if not grpo:
        return []
    td = res.get("teacher_diagnostics") or {}
    headroom = (f"{td['student']['All']:.1f} / {td['teacher']['All']:.1f}"
                if td.get("student") and td.get("teacher") else "-")
    iters = _iters_of(res.get("command", ""))
    longer = "" if iters == PROTOCOL_ITERS else f" ({iters} iterations)"
    rows = []
    for variant in per_seed:
        if variant in ("grpo", "base (no RL)"):
            continue
        arm = _all(per_seed, variant)
        seeds = [s for s in arm if s in grpo]
        if not seeds:
            continue
        diffs = [arm[s] - grpo[s] for s in seeds]
        a_diffs = [agree[variant][s] - agree["grpo"][s] for s in seeds
                   if agree.get(variant, {}).get(s) is not None and agree.get("grpo", {}).get(s) is not None]
        rows.append({"file": name if panel == UNSEEN else f"{name} ({panel})",
                     "base": _base_of(res.get("command", "")), "headroom": headroom,
                     "base_all": statistics.mean(base[s] for s in seeds) if all(s in base for s in seeds) else None,
                     "grpo_all": statistics.mean(grpo[s] for s in seeds), "arm": short_label(variant) + longer,
                     "arm_all": statistics.mean(arm[s] for s in seeds), "minus_grpo": statistics.mean(diffs),
                     "per_seed": diffs, "agreement_minus_grpo": statistics.mean(a_diffs) if a_diffs else None})
    return rows


def merge_repeats(rows: list[dict]) -> list[dict]:
    """One row per arm run: a later report that re-read the same cached runs (same base, arm and per-seed
    figures) adds its file name to the first row instead of a second row."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["base"], r["arm"], r["grpo_all"], tuple(r["per_seed"]))
        if key in out:
            out[key]["file"] += ", " + r["file"]
        else:
            out[key] = dict(r)
    return list(out.values())


def seed_noise(rows: list[dict]) -> tuple[float, int] | None:
    """Pooled standard deviation of the per-seed differences to GRPO around their arm's mean, and its degrees of
    freedom (sum of seeds - 1 over arms with 2+ seeds); None with none. Why: it says how far a k-seed mean
    difference strays by chance (standard error sd / sqrt(k)), so a ledger of near-zero means reads as "no
    effect" rather than "effect hidden by noise" only where that error is small against the goal. The arms of one
    study share its GRPO runs, so the degrees of freedom overstate the independent evidence somewhat."""
    ss, df = 0.0, 0
    for r in rows:
        d = r["per_seed"]
        if len(d) > 1:
            m = statistics.mean(d)
            ss += sum((x - m) ** 2 for x in d)
            df += len(d) - 1
    return ((ss / df) ** 0.5, df) if df else None


def noise_line(rows: list[dict], seeds: int = 3) -> str | None:
    noise = seed_noise(rows)
    if noise is None:
        return None
    sd, df = noise
    return (f"per-seed differences to GRPO spread around their arm's mean with a pooled sd of {sd:.1f} points "
            f"({df} df), so a {seeds}-seed mean difference has a standard error of {sd / seeds ** 0.5:.1f} points")


def _pts(x: float) -> str:
    return f"{round(x, 1) + 0.0:+.1f}"  # + 0.0: a mean of -1e-17 prints +0.0, not -0.0


def table(rows: list[dict]) -> str:
    head = ("| results file | base | student / teacher All % | base All % | GRPO All % | arm | arm All % "
            "| minus GRPO (per seed) | agreement minus GRPO |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        seeds = ", ".join(_pts(d) for d in r["per_seed"])
        agree = "-" if r["agreement_minus_grpo"] is None else _pts(r["agreement_minus_grpo"])
        base = "-" if r["base_all"] is None else f"{r['base_all']:.1f}"
        lines.append(f"| {r['file']} | {r['base']} | {r['headroom']} | {base} | {r['grpo_all']:.1f} | {r['arm']} | "
                     f"{r['arm_all']:.1f} | **{_pts(r['minus_grpo'])}** ({seeds}) | {agree} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path, help="results files (default: studies/results/learning*.json)")
    args = p.parse_args(argv)
    files = args.files or sorted(RESULTS.glob("learning*.json"))
    if not files:
        p.error(f"no results files (looked for {RESULTS}/learning*.json)")
    rows = merge_repeats([r for f in files for r in rows_of(f.name, json.loads(f.read_text()))])
    print(table(rows))
    best = max(rows, key=lambda r: r["minus_grpo"], default=None)
    if best:
        print(f"\n{len(rows)} arms; best minus GRPO {_pts(best['minus_grpo'])} ({best['arm']}, {best['file']})")
    noise = noise_line(rows)
    if noise:
        print(noise)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
