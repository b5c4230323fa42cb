"""Panel evaluation speed: wall time of `opid-eval` for several policies / generation settings,
played side by side in one process so their ratios are comparable on a noisy machine.

Why: issue 13 asks for the whole `alfworld/valid_unseen@v1` panel in <= 3 min on 2 cores with the
warm-started tiny model. The levers measured here: the response style the policy was cloned on
(`opid-sft --response-style reasoned|action`: tokens to decode per step), the generation chunk
(`max_batch_size` of the HF backend: length-sorted chunks waste less prefill on left padding) and
the number of episodes played together (`--batch-envs`), and whose plan the ALFWorld env computes at
every step (`--expert handcoded|sweep|none`: the hand-coded expert's search is most of a step's env
cost; the policy's games are the same, it never sees the plan). Every configuration plays the same task
ids with the same seed; rounds are interleaved (config A, B, ..., then again) and the medians of
`rollout_s` (model load excluded) are reported with their ratio to the first configuration.

    python -m bench.eval_speed --model A --model B [--gen-batch 64 --gen-batch 8] [--batch-envs 16]
        [--expert handcoded --expert sweep] [--panel alfworld/valid_unseen@v1] [--episodes N] [--rounds 1]
        [--torch-threads 2] [--json out.json]

Each --model is `LABEL=PATH` or a path; the grid is models x gen-batch x batch-envs x expert.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path


def parse_model(spec: str) -> tuple[str, str]:
    label, sep, path = spec.partition("=")
    return (label, path) if sep else (Path(spec).name or spec, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", required=True, help="LABEL=PATH or PATH (repeatable)")
    ap.add_argument("--panel", default="alfworld/valid_unseen@v1")
    ap.add_argument("--episodes", type=int, default=None, help="first N games of the panel (default: all)")
    ap.add_argument("--gen-batch", type=int, action="append", default=None,
                    help="HF backend max_batch_size (repeatable; default 64)")
    ap.add_argument("--batch-envs", type=int, action="append", default=None, help="repeatable; default 16")
    ap.add_argument("--expert", action="append", default=None,
                    help="repeatable: the env's expert= setting (ALFWorld: handcoded | sweep | none); default: the "
                         "panel's")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=0.4)
    ap.add_argument("--torch-threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.torch_threads:
        import torch

        torch.set_num_threads(int(args.torch_threads))
    from opid_rllib.eval.panel import evaluate

    models = [parse_model(m) for m in args.model]
    grid = list(itertools.product(models, args.gen_batch or [64], args.batch_envs or [16], args.expert or [None]))
    runs: dict[str, list[dict]] = {}
    for rnd in range(int(args.rounds)):
        for (label, path), gen_batch, batch_envs, expert in grid:
            key = f"{label} gen_batch={gen_batch} batch_envs={batch_envs}" + (f" expert={expert}" if expert else "")
            t0 = time.perf_counter()
            res = evaluate(None, panel=args.panel, episodes=args.episodes, seed=0, batch_envs=batch_envs,
                           progress=False, temperature=args.temperature, llm_model=path,
                           history_length=args.history_length, max_steps=args.max_steps,
                           max_new_tokens=args.max_new_tokens, backend_kwargs={"max_batch_size": gen_batch},
                           env_kwargs={"expert": expert} if expert else None)
            rec = {"round": rnd, "rollout_s": res["timing"]["rollout_s"], "wall_s": time.perf_counter() - t0,
                   "steps": res["counts"]["steps"], "won": res["counts"]["won"], "episodes": res["counts"]["episodes"],
                   "response_tokens": sum(len(t) for e in res["episodes"] for t in e["responses"]) or None}
            runs.setdefault(key, []).append(rec)
            print(f"[bench] round {rnd} {key}: rollout {rec['rollout_s']:.1f}s, {rec['steps']} steps, "
                  f"won {rec['won']}/{rec['episodes']}", flush=True)
    first = None
    rows = []
    print(f"\n{args.panel} episodes={args.episodes or 'all'} rounds={args.rounds} "
          f"threads={__import__('torch').get_num_threads()}")
    print(f"{'configuration':<56} {'median rollout s':>16} {'ratio':>6} {'steps':>6} {'s/step':>7} {'won':>5}")
    for key, recs in runs.items():
        med = statistics.median(r["rollout_s"] for r in recs)
        steps = statistics.median(r["steps"] for r in recs)
        first = first or med
        rows.append({"configuration": key, "median_rollout_s": med, "ratio_to_first": med / first,
                     "median_steps": steps, "runs": recs})
        print(f"{key:<56} {med:>16.1f} {med / first:>6.2f} {steps:>6.0f} {med / max(steps, 1):>7.3f} "
              f"{statistics.median(r['won'] for r in recs):>5.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                                               "panel": args.panel, "episodes": args.episodes, "rows": rows},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
