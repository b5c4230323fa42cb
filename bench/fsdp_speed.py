"""Sharded against replicated learners on CPU: one update of 2 learners (gloo), sharding="fsdp" against today's
bucketed all-reduce, side by side in one run (rounds interleaved), and the ratio.

Why: sharding buys memory (each rank holds half the masters, gradients and AdamW state); it pays with a gather and a
reduce-scatter per block per micro-batch and a whole-weights gather after the update. This says how much, here.
"wide" is a 27M-parameter Qwen3 built offline (random weights, the tiny tokenizer), where the model's size shows.

    python -m bench.fsdp_speed [--model tiny|wide] [--rounds 3] [--rows 8] [--json bench/results/fsdp.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

WIDE = dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
            intermediate_size=1536)
MODES = ("fsdp", "none")


def build_wide(folder: str) -> str:
    """A bigger Qwen3 than tiny, same tokenizer and vocabulary, seeded: where sharding's cost has weight to move."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from opid_rllib.models import resolve_model

    tiny = str(resolve_model("tiny"))
    cfg = AutoConfig.from_pretrained(tiny)
    for k, v in WIDE.items():
        setattr(cfg, k, v)
    if getattr(cfg, "layer_types", None):  # one per layer
        cfg.layer_types = [cfg.layer_types[0]] * cfg.num_hidden_layers
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(folder)
    return folder


def learner(model: str, sharding: str, micro_batch_size: int):
    from envs.base import text_space
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import apply_settings

    cfg = OPIDConfig().environment("searchqa")
    cfg = apply_settings(cfg, llm_model=model, micro_batch_size=micro_batch_size, kl_coeff=0.01, lr=1e-5)
    cfg.learners(num_learners=2)
    cfg.llm(sharding=sharding)
    return cfg.build_learner(spaces={"default_policy": (text_space(), text_space())})


def random_batch(rows: int, rank: int, pad_id: int) -> dict:
    """Random prompts (40-80 tokens) and responses (8-24), this rank's draw, +-1 advantages."""
    import torch

    from opid_rllib.token_logprobs import pack

    g = torch.Generator().manual_seed(100 + rank)
    prompts = [torch.randint(10, 1000, (int(torch.randint(40, 80, (1,), generator=g)),), generator=g).tolist()
               for _ in range(rows)]
    resp = [torch.randint(10, 1000, (int(torch.randint(8, 24, (1,), generator=g)),), generator=g).tolist()
            for _ in range(rows)]
    b = {k: torch.as_tensor(v) for k, v in pack(prompts, resp, pad_id).items()}
    mask = (torch.arange(b["response_ids"].shape[1])[None] < b["response_len"][:, None]).float()
    adv = torch.where(torch.arange(rows)[:, None] % 2 == 0, 1.0, -1.0) * mask
    return {**b, "response_mask": mask, "old_logp": torch.full(mask.shape, -7.0), "advantages": adv}


def run_rank(rank: int, port: int, model: str, rounds: int, rows: int, mb: int, out_dir: str) -> None:
    """Both learners on this rank; per round, one timed update of each (sharded first, then replicated)."""
    import torch.distributed as dist

    from opid_rllib.sharding import local_bytes

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        learners = {m: learner(model, m, mb) for m in MODES}
        pad = learners["none"].module["default_policy"].unwrapped().pad_id
        batch = {"default_policy": random_batch(rows, rank, pad)}
        times: dict = {m: {"update_s": [], "gather_s": []} for m in MODES}
        for r in range(rounds + 1):  # round 0 warms up
            for m, lrn in learners.items():
                dist.barrier()
                t0 = time.perf_counter()
                lrn._uncompiled_update(batch)
                t1 = time.perf_counter()
                lrn.after_gradient_based_update(timesteps={})  # sharded: the whole weights for the runners
                dist.barrier()
                if r:
                    times[m]["update_s"].append(t1 - t0)
                    times[m]["gather_s"].append(time.perf_counter() - t1)
        held = {}
        for m, lrn in learners.items():
            params = list(lrn.module["default_policy"].unwrapped().model.parameters())
            held[m] = local_bytes(params)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump({"times": times, "param_bytes": held}, f)
    finally:
        dist.destroy_process_group()


def summary(per_rank: list[dict]) -> dict:
    """Median seconds per mode (the slower rank each round: the step ends when both have), the sharded/replicated
    ratio, and each rank's parameter bytes."""
    out = {}
    for m in MODES:
        update = [max(ts) for ts in zip(*(r["times"][m]["update_s"] for r in per_rank))]
        gather = [max(ts) for ts in zip(*(r["times"][m]["gather_s"] for r in per_rank))]
        out[m] = {"update_s_median": statistics.median(update), "gather_s_median": statistics.median(gather),
                  "update_s": update}
    total = {m: out[m]["update_s_median"] + out[m]["gather_s_median"] for m in MODES}
    return {"sharded": out["fsdp"], "all_reduce": out["none"],
            "ratio_update": out["fsdp"]["update_s_median"] / out["none"]["update_s_median"],
            "ratio_with_gather": total["fsdp"] / total["none"],
            "param_bytes_per_rank": {"sharded": [r["param_bytes"]["fsdp"] for r in per_rank],
                                     "all_reduce": [r["param_bytes"]["none"] for r in per_rank]}}


def describe(result: dict) -> str:
    """The run's line: both medians and the ratio."""
    return (f"one update of 2 learners, {result['model']}: sharded {result['sharded']['update_s_median']:.3f} s, "
            f"all-reduce {result['all_reduce']['update_s_median']:.3f} s: ratio {result['ratio_update']:.2f} "
            f"({result['ratio_with_gather']:.2f} with the after-update gather); parameter bytes per rank "
            f"{result['param_bytes_per_rank']['sharded']} sharded, {result['param_bytes_per_rank']['all_reduce']} "
            "replicated")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fsdp_speed", description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("tiny", "wide"), default="tiny")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=8, help="rows per rank")
    ap.add_argument("--micro-batch-size", type=int, default=4)
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    import torch
    import torch.multiprocessing as mp

    from opid_rllib.models import resolve_model

    with tempfile.TemporaryDirectory() as tmp:
        model = build_wide(os.path.join(tmp, "wide")) if args.model == "wide" else str(resolve_model("tiny"))
        mp.spawn(run_rank, args=(_free_port(), model, args.rounds, args.rows, args.micro_batch_size, tmp),
                 nprocs=2, join=True)
        per_rank = [json.load(open(os.path.join(tmp, f"rank{r}.json"))) for r in (0, 1)]
    result = {"model": args.model, "rows_per_rank": args.rows, "micro_batch_size": args.micro_batch_size,
              "rounds": args.rounds, "learners": 2, "torch": torch.__version__, "cpus": os.cpu_count(),
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), **summary(per_rank)}
    print(describe(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
