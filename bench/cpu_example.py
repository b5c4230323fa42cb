"""Does `opid-train --env alfworld --cpu-example` learn from its warm start? Its success curve on 3 seeds.

    python -m bench.cpu_example --seeds 0,1,2 --stop-iters 10 --json bench/results/cpu_example.json
    python -m bench.cpu_example --seeds 0 -- --lr 1e-4 --group-size 4     # any opid-train flags after --
    python -m bench.cpu_example --table bench/results/cpu_example.json     # the table docs/RESULTS.md quotes

Each run is the config `opid-train --env alfworld --cpu-example --model WARM_START --seed S [FLAGS]` builds (the
same parser and config_from_args), started from the warm start `opid-sft --env alfworld --cpu-example` writes (the
learning gate's rung-1 base, cached), trained in this process for --stop-iters iterations. Measured like rung 1
(tuned_examples/alfworld_rung1.py): before training and after every iteration, each of the six games is played
EVAL_COPIES times at the training temperature on fresh sampling seeds, no analyzer, no skills (the training's random
streams are untouched). A seed passes when the mean of its last 3 evaluations is above its first iteration's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

WINDOW = 3


def group_stats(episodes, cfg) -> dict:
    """What the outcome advantage made of one iteration's groups: the share of groups with no win and with no loss
    (no outcome contrast), the share of the positive advantage that lands on steps of lost episodes (reinforcing what
    failed), and the share of format-invalid steps."""
    from opid_rllib.connectors.outcome import outcome_advantages, step_validity

    adv = outcome_advantages(episodes, cfg.invalid_action_penalty, cfg.outcome_adv_norm, cfg.invalid_action_source)
    won = [bool(ep.custom_data["opid"]["won"]) for ep in episodes]
    groups: dict = {}
    for ep, w in zip(episodes, won):
        groups.setdefault(ep.custom_data["opid"]["group_id"], []).append(w)
    pos_lost = sum(float(np.clip(a, 0, None).sum()) for a, w in zip(adv, won) if not w)
    pos_all = sum(float(np.clip(a, 0, None).sum()) for a in adv)
    invalid = np.concatenate([~step_validity(ep, cfg.invalid_action_source) for ep in episodes])
    return {"groups_all_lost": round(float(np.mean([not any(g) for g in groups.values()])), 3),
            "groups_all_won": round(float(np.mean([all(g) for g in groups.values()])), 3),
            "positive_adv_on_lost": round(pos_lost / pos_all, 3) if pos_all else 0.0,
            "invalid_steps": round(float(invalid.mean()), 4)}


def run_seed(model: str, seed: int, stop_iters: int, flags: list[str]) -> dict:
    from opid_rllib.cli.train import config_from_args
    from opid_rllib.cli.train_parser import build_parser
    from tuned_examples import alfworld_rung1 as rung1

    args = build_parser().parse_args(["--env", "alfworld", "--cpu-example", "--model", model, "--seed", str(seed),
                                      *flags])
    cfg = rung1.gate_evaluation(config_from_args(args), seed)
    algo = cfg.build_algo()
    sample, stats = algo._sample, []

    def observed(tasks):  # the training groups, as the learner gets them (an observer: nothing is changed)
        episodes, metrics = sample(tasks)
        stats.append(group_stats(episodes, algo.config))
        return episodes, metrics

    algo._sample = observed
    t0 = time.perf_counter()
    try:
        base = rung1.evaluate(algo, seed=rung1.BASE_SEED, temperature=rung1.GATE_TEMPERATURE)["success"]
        evals, train = [], []
        for it in range(1, stop_iters + 1):
            result = algo.train()
            train.append(float(result["opid"]["success_rate"]))
            evals.append(float(result["evaluation"]["success_rate"]))
            learner = result.get("learners", {}).get("default_policy", {})
            stats[-1].update({k: round(float(learner[k]), 4) for k in ("entropy", "kl_ref") if k in learner})
            print(f"[cpu_example] seed {seed} iter {it}: eval {evals[-1]:.3f} train {train[-1]:.3f} {stats[-1]} "
                  f"({time.perf_counter() - t0:.0f}s)", flush=True)
    finally:
        algo.stop()
    last = float(np.mean(evals[-WINDOW:]))
    return {"seed": seed, "base": base, "curve": evals, "train_curve": train, "groups": stats,
            f"last{WINDOW}_mean": round(last, 4),
            "passed": bool(last > evals[0]), "seconds": round(time.perf_counter() - t0, 1)}


def table(summary: dict) -> str:
    """The curves as the Markdown table docs/RESULTS.md quotes: per seed, success before training and after each
    iteration, the first iteration's against the mean of the last WINDOW."""
    n = summary["stop_iters"]
    head = "| seed | before | " + " | ".join(str(i) for i in range(1, n + 1)) + f" | last {WINDOW} | passed |"
    rows = [head, "|" + "---|" * (n + 4)]
    for r in summary["runs"]:
        curve = " | ".join(f"{x:.2f}" for x in r["curve"])
        rows.append(f"| {r['seed']} | {r['base']:.2f} | {curve} | {r[f'last{WINDOW}_mean']:.2f} | "
                    f"{'yes' if r['passed'] else 'no'} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--stop-iters", type=int, default=10)
    ap.add_argument("--json", default=None, help="write the curves here (runs already in it for other seeds are kept)")
    ap.add_argument("--table", default=None, metavar="JSON", help="print the Markdown table of a results file, run nothing")
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    import ray

    from tuned_examples import alfworld_rung1 as rung1

    model = str(rung1.warm_start())
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    out = Path(args.json) if args.json else None
    old = json.loads(out.read_text()) if out and out.exists() else {}
    command = "python -m bench.cpu_example " + " ".join(argv)
    runs = [r for r in old.get("runs", []) if old.get("flags") == flags]
    for seed in (int(s) for s in args.seeds.split(",") if s.strip()):
        runs = [r for r in runs if r["seed"] != seed] + [dict(run_seed(model, seed, args.stop_iters, flags),
                                                               command=command)]
        summary = {"command": command, "flags": flags, "stop_iters": args.stop_iters, "window": WINDOW,
                   "eval_copies": rung1.EVAL_COPIES, "temperature": rung1.GATE_TEMPERATURE,
                   "runs": sorted(runs, key=lambda r: r["seed"])}
        summary["passed_seeds"] = sum(r["passed"] for r in summary["runs"])
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(summary, indent=1) + "\n")
    for r in summary["runs"]:
        print(f"[cpu_example] seed {r['seed']}: base {r['base']:.3f}, first {r['curve'][0]:.3f}, last {WINDOW} "
              f"{r[f'last{WINDOW}_mean']:.3f} -> {'passed' if r['passed'] else 'NOT passed'} ({r['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
