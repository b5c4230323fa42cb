"""Speed of opid/SearchQA-v0: env steps/s and retriever queries/s (single vs batched requests).

Why: a rollout steps hundreds of envs per iteration; this shows whether retrieval (HTTP + BM25)
can ever be the bottleneck next to LLM generation. Medians over repeats.

    python -m bench.searchqa_speed [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import envs
from envs.searchqa.client import LocalRetriever, RetrieverClient
from envs.searchqa.corpus import build_world
from envs.searchqa.retriever_server import builtin_server_url, shared_index


def env_steps_per_s(retriever: str, n_episodes: int) -> float:
    """Expert-plan episodes over the test split (searches + answers, ~2.5 steps per episode)."""
    env = envs.make("searchqa", split="test", retriever=retriever)
    ids = list(env.task_ids())[:n_episodes]
    env.reset(options={"task_id": ids[0]})
    env.step("<search>warm up</search>")
    steps, t = 0, time.perf_counter()
    for tid in ids:
        _, info = env.reset(options={"task_id": tid})
        term = trunc = False
        while not (term or trunc):
            _, _, term, trunc, info = env.step(info["expert_actions"][0])
            steps += 1
    return steps / (time.perf_counter() - t)


def queries_per_s(client, queries: list[str], batch: int) -> float:
    t = time.perf_counter()
    for i in range(0, len(queries), batch):
        client.search(queries[i:i + batch], topk=3)
    return len(queries) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--queries", type=int, default=1024)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    t = time.perf_counter()
    world = build_world()
    t_world = time.perf_counter() - t
    t = time.perf_counter()
    index = shared_index()
    t_index = time.perf_counter() - t
    url = builtin_server_url()
    # realistic queries: the test questions themselves plus the expert's title queries
    qs = [q.question for q in world.questions["train"][: args.queries // 2]]
    qs += [p.title for p in world.passages[: args.queries - len(qs)]]

    med = lambda f: statistics.median(f() for _ in range(args.repeats))
    res: dict = {"passages": len(world.passages), "build_world_s": round(t_world, 3),
                 "bm25_index_s": round(t_index, 3)}
    for mode in ("http", "local"):
        res[f"env_steps_per_s_{mode}"] = round(med(lambda: env_steps_per_s(mode, args.episodes)), 1)
    http, local = RetrieverClient(url, timeout=30), LocalRetriever(index)
    for batch in (1, 16, 64):
        res[f"http_qps_batch{batch}"] = round(med(lambda: queries_per_s(http, qs, batch)), 1)
        res[f"local_qps_batch{batch}"] = round(med(lambda: queries_per_s(local, qs, batch)), 1)
    for k, v in res.items():
        print(f"{k:28s} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
