"""Speed of opid/WebShop-v0 (offline): env steps/s (one env; 16 envs stepped round-robin as a
rollout does) and BM25 search queries/s (uncached and cached).

Why: a rollout steps 16x8 envs per iteration; this shows the env is never the bottleneck next to
LLM generation. The policy mixes the expert's next action with random admissible clicks and fresh
searches, so pages, pagination and new (uncached) queries are all exercised. Medians over repeats.

    python -m bench.webshop_env_speed [--repeats 5] [--steps 3000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import envs
from envs.webshop.catalog import build_world
from envs.webshop.search import SearchEngine

WORDS = ["black", "gluten free", "long lasting", "mat", "shoes", "non slip", "coffee", "size large",
         "stainless steel", "dog", "wireless", "organic tea", "red", "queen", "vanilla", "easy to use"]


def _policy(rng: random.Random, info: dict) -> str:
    if rng.random() < 0.6 and info.get("expert_actions"):
        return info["expert_actions"][0]
    acts = info["admissible_actions"] or ["click[x]"]
    a = rng.choice(acts)
    return a.replace("<your query>", " ".join(rng.sample(WORDS, 2)) + f" {rng.randrange(1000)}")


def steps_per_s(n_envs: int, n_steps: int, seed: int, expert: bool = True) -> float:
    """Round-robin over n_envs envs (n_envs=1: a single env); auto-reset on episode end."""
    rng = random.Random(seed)
    ids = list(build_world(0).splits["train"])
    pool = [envs.make("webshop", split="train", expert=expert) for _ in range(n_envs)]
    infos = [e.reset(options={"task_id": rng.choice(ids)})[1] for e in pool]
    t = time.perf_counter()
    for k in range(n_steps):
        i = k % n_envs
        _, _, term, trunc, info = pool[i].step(_policy(rng, infos[i]))
        if term or trunc:
            info = pool[i].reset(options={"task_id": rng.choice(ids)})[1]
        infos[i] = info
    return n_steps / (time.perf_counter() - t)


def queries_per_s(n: int, seed: int) -> tuple[float, float]:
    """(uncached, cached) queries/s on instruction texts, on a fresh engine."""
    w = build_world(0)
    engine = SearchEngine(w.products)
    goals = list(w.goals.values())
    queries = [random.Random(seed + i).choice(goals).instruction for i in range(n)]
    queries = list(dict.fromkeys(queries))
    t = time.perf_counter()
    for q in queries:
        engine.search(q)
    cold = len(queries) / (time.perf_counter() - t)
    t = time.perf_counter()
    for q in queries:
        engine.search(q)
    return cold, len(queries) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=1500)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    t = time.perf_counter()
    build_world(0)
    envs.make("webshop")  # builds the shared index
    startup = time.perf_counter() - t
    rows = {
        "env steps/s, 1 env": [steps_per_s(1, args.steps, r) for r in range(args.repeats)],
        "env steps/s, 16 envs round-robin": [steps_per_s(16, args.steps, r) for r in range(args.repeats)],
        "env steps/s, 16 envs, expert=False": [steps_per_s(16, args.steps, r, expert=False)
                                               for r in range(args.repeats)],
    }
    qs = [queries_per_s(args.queries, r) for r in range(args.repeats)]
    rows["search queries/s, uncached"] = [c for c, _ in qs]
    rows["search queries/s, cached"] = [h for _, h in qs]
    print(f"catalog + index build (once per process): {startup:.2f} s")
    print(f"{'measure':40s} {'median':>10s} {'min':>10s} {'max':>10s}   (repeats={args.repeats})")
    result = {"startup_s": startup}
    for name, vals in rows.items():
        med = statistics.median(vals)
        result[name] = med
        print(f"{name:40s} {med:10.0f} {min(vals):10.0f} {max(vals):10.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
