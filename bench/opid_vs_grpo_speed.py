"""OPID vs GRPO iteration wall time on the same setup, side by side in one run.

    python -m bench.opid_vs_grpo_speed [--env alfworld] [--iters 4] [--model tiny]

Both algorithms are built once; iterations alternate (GRPO, OPID, GRPO, OPID, ...) so machine
noise hits both alike. Reports medians per phase and the OPID/GRPO ratio (goal <= 1.15: the
analyzer overlaps the rollout; the only extra work is one no-grad forward over routed steps).
The first iteration of each is a warm-up and is dropped.

Caveat: "iteration" is wall time measured here, and the old-log-prob / re-score rows are logged per
iteration; the rollout / learner update / weight sync rows are RLlib's smoothed timers (they lag and
carry the warm-up). bench/throughput.py times every phase directly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def phases(result: dict) -> dict[str, float]:
    t = result.get("timers", {})
    lr = result.get("learners", {}).get("opid", {}).get("timers", {})
    runner = result.get("env_runners", {}).get("opid_runner", {})
    return {
        "iteration": t.get("training_iteration", float("nan")),
        "rollout": t.get("env_runner_sampling_timer", float("nan")),
        "  generate": runner.get("generate_s", float("nan")),
        "  analyzer wait": runner.get("analyzer_wait_s", float("nan")),
        "learner update": t.get("learner_update_timer", float("nan")),
        "  old log-probs": lr.get("old_logp_s", 0.0),
        "  skill re-score": lr.get("rescore_s", 0.0),
        "weight sync": t.get("synch_weights", float("nan")),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="alfworld")
    p.add_argument("--model", default="tiny")
    p.add_argument("--iters", type=int, default=4, help="measured iterations per algorithm (after 1 warm-up)")
    p.add_argument("--tasks-per-iter", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--json", default=None, help="also write the raw figures here")
    args = p.parse_args(argv)

    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import CPU_TINY, apply_preset

    def build(preset):
        cfg = OPIDConfig().environment(args.env, env_config={"split": "train", "max_steps": args.max_steps})
        cfg = apply_preset(cfg, "opid", **dict(CPU_TINY, llm_model=args.model, max_steps=args.max_steps,
                                                 tasks_per_iter=args.tasks_per_iter, group_size=args.group_size,
                                                 max_new_tokens=args.max_new_tokens))
        return apply_preset(cfg, preset).debugging(seed=0).build_algo()

    algos = {"grpo": build("grpo"), "opid": build("opid")}
    rows: dict[str, list[dict]] = {k: [] for k in algos}
    for it in range(args.iters + 1):
        for name, algo in algos.items():
            t0 = time.perf_counter()
            res = algo.train()
            ph = phases(res)
            ph["iteration"] = time.perf_counter() - t0
            if it > 0:
                rows[name].append(ph)
            print(f"iter {it} {name}: {ph['iteration']:.1f}s", flush=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    print(f"\nmedians over {args.iters} iterations each (env={args.env}, model={args.model}, "
          f"{args.tasks_per_iter} tasks x {args.group_size}, max_steps={args.max_steps})")
    print(f"{'phase':<20}{'GRPO s':>10}{'OPID s':>10}{'OPID/GRPO':>11}")
    for k in med["grpo"]:
        g, o = med["grpo"][k], med["opid"][k]
        ratio = f"{o / g:.2f}" if g and g == g and g > 1e-3 else "-"
        print(f"{k:<20}{g:>10.2f}{o:>10.2f}{ratio:>11}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows, "medians": med}, f, indent=1)
    for a in algos.values():
        a.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
