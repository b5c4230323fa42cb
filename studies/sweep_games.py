"""How often ALFWorld's sweep demonstrator (envs/alfworld/sweep.py) wins, per task type: the ceiling of a student
that copies it exactly. No model; the env runs without its expert (the sweep does not read it).

    python -m studies.sweep_games --splits train,valid_unseen [--max-steps 30] [--no-priors]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--splits", default="train,valid_unseen")
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--no-priors", action="store_true", help="search every receptacle, not the priors' classes")
    args = ap.parse_args(argv)

    from envs.alfworld.env import ALFWorldEnv
    from envs.alfworld.sweep import play_sweep

    for split in [s for s in args.splits.split(",") if s]:
        env = ALFWorldEnv(split=split, expert=False)
        t0, wins, steps = time.perf_counter(), collections.defaultdict(list), []
        for task_id in env.task_ids():
            r = play_sweep(env, task_id, args.max_steps, use_priors=not args.no_priors)
            wins[r["task_type"]].append(r["won"])
            steps.append(len(r["actions"]))
        won = sum(sum(v) for v in wins.values())
        per = ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in sorted(wins.items()))
        print(f"{split}: won {won}/{len(steps)} ({100 * won / len(steps):.1f} %) within {args.max_steps} steps; "
              f"{per}; mean steps {sum(steps) / len(steps):.1f}; {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
