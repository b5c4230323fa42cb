"""OPID against GRPO on the learning gate's rung 1 (tuned_examples/alfworld_rung1.py): four arms, paired seeds.

    python -m bench.learning_gate run --arms grpo,opid,content_free,shuffled --seeds 0,1,2 --out runs/gate
    python -m bench.learning_gate unseen runs/gate      # generalisation: the 126 unseen games, once per final policy
    python -m bench.learning_gate summary runs/gate --json bench/results/learning_gate.json --plot docs/img/gate.png

Every arm starts from the rung's base, trains the same number of iterations (`--iters`, no early stop) with one
optimizer step per iteration, and is evaluated after each one on the rung's games at the training temperature (fresh
sampling seeds, no analyzer, no skills). Arms:
  grpo          outcome advantage only;
  opid          the paper's update: raw Delta, critical-first routing, step skills that do not quote the sampled
                command, no teacher samples (the rung's OPID_SETTINGS);
  content_free  opid with every skill replaced by content-free filler of the same token length (any inserted
                text lowers the sampled tokens' log-prob on average: the prompt-shift control);
  shuffled      opid with the skills written for another game.
`run` writes one JSON per arm and seed into --out (runs already there are kept, so shards can run side by side);
`summary` gathers them: curve areas (mean success points over iterations), iterations until the 3-iteration mean
reaches GRPO's final success (per seed), and the differences to GRPO.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ARMS = {"grpo": ("grpo", {}), "opid": ("opid", {}), "content_free": ("opid", {"content_free_skills": True}),
        "shuffled": ("opid", {"shuffle_skills": True})}
ITERS = 20


def _rung1():
    """tuned_examples/alfworld_rung1.py, imported when needed (`--help` and the summary need none of it)."""
    from tuned_examples import alfworld_rung1

    return alfworld_rung1


def run_arms(arms: list[str], seeds: list[int], iters: int, out: Path) -> None:
    import ray

    rung1 = _rung1()
    model = rung1.warm_start()
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    out.mkdir(parents=True, exist_ok=True)
    for arm in arms:
        preset, extra = ARMS[arm]
        for seed in seeds:
            path = out / f"{arm}_s{seed}.json"
            if path.exists():
                print(f"[gate] {path} exists; kept")
                continue
            t0 = time.perf_counter()
            r = rung1.run(preset, model, seed, stop_iters=iters, full_curve=True,
                          save_dir=out / "models" / f"{arm}_s{seed}", **extra)
            r.update(arm=arm, iters=iters, model=str(model), wall_s=round(time.perf_counter() - t0, 1))
            path.write_text(json.dumps(r, indent=1) + "\n")
            print(f"[gate] {arm} seed {seed}: wrote {path}")


UNSEEN = "alfworld/valid_unseen@v1"


def play_unseen(out: Path, max_steps: int = 30) -> None:
    """Generalisation, outside the gate: the base and every final policy `run` saved (OUT/models/ARM_sSEED) play the
    126 unseen games once (T 0.4, the env's 30-step cap, the rung's prompt settings); OUT/unseen_NAME.json each."""
    from opid_rllib.eval.panel import evaluate

    rung1 = _rung1()
    models = [("base", rung1.warm_start())] + [(p.name, p) for p in sorted((out / "models").glob("*_s*"))]
    for name, model in models:
        path = out / f"unseen_{name}.json"
        if path.exists():
            print(f"[gate] {path} exists; kept")
            continue
        res = evaluate(panel=UNSEEN, llm_model=str(model), temperature=0.4, max_steps=max_steps, seed=0,
                       progress=False, **{k: rung1.SETTINGS[k] for k in ("history_length", "max_new_tokens",
                                                                          "max_prompt_len")})
        table = res["table"]
        path.write_text(json.dumps({"model": name, "panel": UNSEEN, "success_pct": table["success_pct"],
                                    "expert_agreement_pct": table.get("expert_agreement_pct"),
                                    "max_steps": max_steps, "wall_s": res["timing"]["wall_s"]}, indent=1) + "\n")
        print(f"[gate] {name} on {UNSEEN}: {table['success_pct']['All']} % in {res['timing']['wall_s']:.0f} s")


def iters_to(curve: list[float], threshold: float, window: int) -> int | None:
    """First iteration whose `window`-iteration mean reaches `threshold` (None if never)."""
    for i in range(window, len(curve) + 1):
        if np.mean(curve[i - window:i]) >= threshold - 1e-9:
            return i
    return None


def teacher_trend(teacher: list[dict]) -> dict:
    """The self-teacher over the run (skill arms): the share of episode-skill rows whose sampled command was on the
    expert's plan, and Delta per token on those rows, at the first and the last iteration (does it wear down?)."""
    rows = [t for t in teacher if t.get("delta_ep/on_plan_steps") is not None]
    if not rows:
        return {}

    def at(t):
        on, off = t["delta_ep/on_plan_steps"], t.get("delta_ep/off_plan_steps", 0.0)
        return round(on / (on + off), 3) if on + off else None, t.get("delta_ep/on_plan_token_mean")

    (share0, delta0), (share1, delta1) = at(rows[0]), at(rows[-1])
    return {"on_plan_share_first_last": [share0, share1], "on_plan_delta_first_last": [delta0, delta1]}


def summarize(runs: list[dict], window: int = 3) -> dict:
    """Per arm and seed: area, final success, iterations to GRPO's final success; means of the differences."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    seeds = sorted({s for a, s in by if a == "grpo"})
    table, diffs = [], {"opid": [], "content_free": [], "shuffled": []}
    ratios, grpo_minus_base = [], []
    for s in seeds:
        g = by[("grpo", s)]
        threshold = float(np.mean(g["curve"][-window:]))   # GRPO's final success on this seed
        g_iters = iters_to(g["curve"], threshold, window)
        grpo_minus_base.append(round(100 * (threshold - g["base"]), 1))
        for arm in ARMS:
            r = by.get((arm, s))
            if r is None:
                continue
            area = 100 * float(np.mean(r["curve"]))
            it = iters_to(r["curve"], threshold, window)
            table.append({"arm": arm, "seed": s, "base": r["base"], "area": round(area, 1),
                          "final": round(100 * float(np.mean(r["curve"][-window:])), 1),
                          "iters_to_grpo_final": it, "seconds": r.get("wall_s", r.get("seconds")),
                          **teacher_trend(r.get("teacher") or [])})
            if arm in diffs:
                diffs[arm].append(area - 100 * float(np.mean(g["curve"])))
            if arm == "opid":
                # never reaching it counts as the whole budget, so the ratio is a lower bound then
                ratios.append((it or len(r["curve"])) / (g_iters or len(g["curve"])))
    mean = lambda v: round(float(np.mean(v)), 2) if v else None  # noqa: E731
    return {"table": table, "summary": {
        "grpo_minus_base": grpo_minus_base,
        "opid_auc_minus_grpo": mean(diffs["opid"]), "opid_iters_to_threshold_ratio": mean(ratios),
        "contentfree_auc_minus_grpo": mean(diffs["content_free"]),
        "shuffled_auc_minus_grpo": mean(diffs["shuffled"]),
        "per_seed": {k: [round(x, 1) for x in v] for k, v in diffs.items()},
        "threshold": f"GRPO's final success (mean of its last {window} evaluations), per seed"}}


def load_runs(folder: Path) -> list[dict]:
    """This script's per-run JSONs, and the runs inside a rung-1 `--json` file (`alfworld_rung1.py --full-curve`,
    whose GRPO runs are this comparison's GRPO arm when their --stop-iters equals --iters here)."""
    runs = []
    for p in sorted(folder.glob("*.json")):
        if p.name.startswith("unseen_"):
            continue
        d = json.loads(p.read_text())
        for r in d.get("runs", [d]):
            if "arm" not in r:
                if r.get("preset") != "grpo" or r.get("overrides"):
                    continue
                r = dict(r, arm="grpo", iters=len(r["curve"]), command=d.get("command"))
            runs.append(r)
    return runs


def plot(runs: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for k, arm in enumerate(ARMS):
        rs = [r for r in runs if r["arm"] == arm]
        if not rs:
            continue
        n = min(len(r["curve"]) for r in rs)
        curves = np.array([[r["base"], *r["curve"][:n]] for r in rs])
        for c in curves:
            ax.plot(range(n + 1), c, color=f"C{k}", alpha=0.25, linewidth=0.8)
        ax.plot(range(n + 1), curves.mean(0), color=f"C{k}", linewidth=2, label=f"{arm} (mean of {len(rs)} seeds)")
    ax.set(xlabel="training iteration", ylabel="success at T 1.0 (fresh seeds), held-in games", ylim=(0, 1.02),
           title="OPID against GRPO on rung 1 of the learning gate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train arms x seeds, one JSON each")
    r.add_argument("--arms", default=",".join(ARMS))
    r.add_argument("--seeds", default="0,1,2")
    r.add_argument("--iters", type=int, default=ITERS)
    r.add_argument("--out", required=True)
    u = sub.add_parser("unseen", help="play the 126 unseen games with the base and each saved final policy")
    u.add_argument("folder")
    s = sub.add_parser("summary", help="gather a --out folder into one JSON (and a PNG)")
    s.add_argument("folder")
    s.add_argument("--json", default=None)
    s.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        arms = [a.strip() for a in args.arms.split(",") if a.strip()]
        bad = [a for a in arms if a not in ARMS]
        if bad:
            ap.error(f"--arms: {bad[0]!r} is not an arm; choose from {list(ARMS)}")
        run_arms(arms, [int(x) for x in args.seeds.split(",") if x.strip()], args.iters, Path(args.out))
        return 0
    if args.cmd == "unseen":
        play_unseen(Path(args.folder))
        return 0
    runs = load_runs(Path(args.folder))
    if not any(r["arm"] == "grpo" for r in runs):
        print(f"[gate] no GRPO run in {args.folder}: the summary is relative to it", file=sys.stderr)
        return 2
    out = summarize(runs)
    plays = [json.loads(p.read_text()) for p in sorted(Path(args.folder).glob("unseen_*.json"))]
    unseen = {d["model"]: d for d in plays}
    if unseen:  # generalisation, outside the gate (`unseen`)
        out["unseen"] = {"panel": UNSEEN, "command": "python -m bench.learning_gate unseen OUT",
                         "success_pct_all": {k: v["success_pct"]["All"] for k, v in unseen.items()},
                         "expert_agreement_pct": {k: v["expert_agreement_pct"] for k, v in unseen.items()}}
    out["runs"] = runs
    out["commands"] = sorted({r.get("command") or f"python -m bench.learning_gate run --arms {r['arm']} --seeds "
                              f"{r['seed']} --iters {r['iters']} --out OUT" for r in runs})
    print(json.dumps(out["summary"], indent=1))
    for row in out["table"]:
        print(row)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.plot:
        plot(runs, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
