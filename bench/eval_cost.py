"""What validation during training costs (config.evaluation, opid_rllib/evaluation.py): one evaluation of an ALFWorld
panel by the tiny model, beside one training iteration of the CPU example, in one process.

    python -m bench.eval_cost --panels alfworld/smoke@v1,alfworld/valid_unseen@v1 --json bench/results/eval_cost.json

Each panel is played once (all its games, 30 steps, T 0.4, 16 games side by side) on the training runner, as
`opid-train --eval-interval N --eval-panel P` does; the training iteration is the CPU example's (GRPO, 4 tasks x 4).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def measure(panels: list[str], max_steps: int, seed: int) -> dict:
    import ray

    from envs.panels import get_panel
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import CPU_TINY, apply_preset

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    rows = []
    for name in panels:
        n = len(get_panel(name).task_ids)
        cfg = apply_preset(OPIDConfig().environment("alfworld", env_config={"split": "train",
                                                                          "max_steps": CPU_TINY["max_steps"]}),
                           "grpo", **CPU_TINY, torch_threads=1)
        cfg.evaluation(evaluation_interval=1, evaluation_duration=n, eval_panel=name, eval_seed=seed)
        cfg.max_steps = max_steps  # the panel's step cap (the env's evaluation cap, as opid-eval)
        algo = cfg.build_algo()
        try:
            t0 = time.perf_counter()
            ev = algo.evaluate()
            eval_s = time.perf_counter() - t0
            steps = sum(r["length"] for r in algo.last_evaluation_episodes)
            t0 = time.perf_counter()
            res = algo.train()  # one training iteration, then the evaluation after it (its wall_s)
            both_s = time.perf_counter() - t0
        finally:
            algo.stop()
        again = res["evaluation"]["wall_s"]
        row = {"panel": name, "games": n, "steps": steps, "evaluation_s": round(eval_s, 1),
               "evaluation_after_an_iteration_s": round(again, 1), "steps_per_s": round(steps / eval_s, 2),
               "training_iteration_s": round(both_s - again, 1), "success_rate": ev["success_rate"]}
        print(f"[eval_cost] {name}: {n} games, {steps} steps in {eval_s:.1f} s ({row['steps_per_s']} steps/s); "
              f"after an iteration {again:.1f} s; the training iteration itself {both_s - again:.1f} s", flush=True)
        rows.append(row)
    ray.shutdown()
    return {"rows": rows, "max_steps": max_steps, "model": "tiny", "temperature": 0.4}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--panels", default="alfworld/smoke@v1,alfworld/valid_unseen@v1")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    out = measure([x for x in a.panels.split(",") if x], a.max_steps, a.seed)
    out["command"] = "python -m bench.eval_cost " + " ".join(sys.argv[1:] if argv is None else argv)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
