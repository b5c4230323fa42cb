"""Benchmark (not a test): ALFWorld env throughput on this machine.

Measures, as medians over repeats:
  * steps/s of one env (random admissible actions, resets included when an episode ends), with
    and without the expert;
  * steps/s of 16 envs stepped together, round-robin in one process, as the grouped runner does
    (G=8 copies of 2 tasks, so resets of a task already loaded are exercised);
  * reset latency: first load of a game vs. a repeat reset;
  * games generated per second (make_game + write to disk), i.e. the first-use cost of a game.
Reference point: the official ALFWorld TextWorld env runs at ~10-15 steps/s (alfworld issue #23).

    python -m bench.alfworld_env_speed [--repeats 3] [--steps 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time


def run_envs(envs, task_ids, steps: int, seed: int) -> float:
    """Step all envs round-robin with random admissible actions; returns env-steps per second."""
    rng = random.Random(seed)
    infos = [env.reset(options={"task_id": task_ids[i % len(task_ids)]})[1] for i, env in enumerate(envs)]
    t0, n = time.perf_counter(), 0
    while n < steps:
        for i, env in enumerate(envs):
            _, _, term, trunc, infos[i] = env.step(rng.choice(infos[i]["admissible_actions"]))
            n += 1
            if term or trunc:
                infos[i] = env.reset(options={"task_id": task_ids[i % len(task_ids)]})[1]
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200, help="env steps per measurement")
    ap.add_argument("--split", default="valid_unseen")
    args = ap.parse_args()  # before any engine exists (fast-downward rewrites sys.argv, P2)

    from envs.alfworld import generator as gen
    from envs.alfworld.env import ALFWorldEnv

    tmp = tempfile.TemporaryDirectory(prefix="alfworld_bench_")  # removed at exit
    cache = f"{tmp.name}/cache"
    make = lambda expert=True: ALFWorldEnv(split=args.split, cache_dir=cache, data_dir="",  # noqa: E731
                                           expert=expert)
    ids = list(make().task_ids())
    rows = []

    one = make()
    r1 = [run_envs([one], ids[k::7][:4], args.steps, k) for k in range(args.repeats)]
    rows.append(("1 env, steps/s", statistics.median(r1)))
    bare = make(expert=False)
    r0 = [run_envs([bare], ids[k::7][:4], args.steps, k) for k in range(args.repeats)]
    rows.append(("1 env without expert, steps/s", statistics.median(r0)))

    sixteen = [make() for _ in range(16)]
    r16 = [run_envs(sixteen, ids[10 * k + 3:10 * k + 5], args.steps * 2, k) for k in range(args.repeats)]
    rows.append(("16 envs round-robin, steps/s", statistics.median(r16)))

    first, again = [], []
    for k in range(args.repeats * 3):
        env, tid = make(), ids[(37 * k + 11) % len(ids)]
        t0 = time.perf_counter()
        env.reset(options={"task_id": tid})
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.reset(options={"task_id": tid})
        again.append(time.perf_counter() - t0)
    rows.append(("reset, first use of a game, ms", 1000 * statistics.median(first)))
    rows.append(("reset, same game again, ms", 1000 * statistics.median(again)))

    specs = [s for s in gen.load_specs() if s["split"] == args.split][:60]
    rates = []
    for k in range(args.repeats):
        out = f"{tmp.name}/gen{k}"
        t0 = time.perf_counter()
        for s in specs:
            gen.write_game(gen.make_game(s["fp"], s["task_type"], s["seed"]), out)
        rates.append(len(specs) / (time.perf_counter() - t0))
    rows.append(("games generated + written, games/s", statistics.median(rates)))

    ref = 12.5
    print(f"{'measure (median of %d)' % args.repeats:<40}{'value':>10}")
    for name, value in rows:
        print(f"{name:<40}{value:>10.1f}")
    print(f"{'reference ALFWorld env (issue #23)':<40}{'10-15':>10}  steps/s")
    tmp.cleanup()
    print(f"speed-up vs ~{ref} steps/s: 1 env x{rows[0][1] / ref:.1f}, 16 envs x{rows[2][1] / ref:.1f}")


if __name__ == "__main__":
    main()
