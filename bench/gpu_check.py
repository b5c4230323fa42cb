"""Ray-free GPU check of the learner's numerics and memory, with plain torch / transformers / peft.

    python -m bench.gpu_check --out gpu_check.json                       # the tiny model, built offline
    python -m bench.gpu_check --model PATH --dtype bfloat16 --out x.json  # a local checkpoint
    python -m bench.gpu_check --arch Qwen/Qwen3-1.7B --batch 2 --prompt-len 2048 --response-len 512 \
        --gradient-checkpointing --out x.json      # a recipe's architecture, random weights (no download)

What it runs (on CUDA when there is one, else on CPU, and says so):
  * full fine-tuning as the learner does it: fp32 master weights, bf16 autocast forward/backward of
    `response_logprobs` (the project's Ray-free log-prob function) with entropy, a frozen bf16 KL
    reference pass, AdamW at lr 1e-6; two steps, the second measured;
  * the same AdamW step on bf16 parameters: the fraction of weights a 1e-6 step moves in each
    (bf16 rounds most such updates away: the reason for fp32 master weights);
  * score(): no-grad log-probs from the bf16 copy against the fp32 master under autocast;
  * LoRA (peft): frozen bf16 base, fp32 adapters; only adapter parameters change, and the base with
    adapters disabled (the KL reference) still gives the base's log-probs;
  * a single-rank FSDP2 step (sharding="fsdp", opid_rllib/sharding.py): per-block fully_shard then the root,
    bf16 compute over fp32 masters, fp32 reduce, the whole-model norm, the whole weights gathered back; against
    the same step unsharded under autocast (one rank: same weights, so the gaps are bf16 rounding only);
  * peak memory per phase (torch.cuda.max_memory_allocated) next to opid_rllib.memory_plan's estimate.
Imports neither Ray nor anything that imports Ray (tests/plan/test_gpu_check.py checks with Ray blocked).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import time

import torch

from opid_rllib import memory_plan as mp
from opid_rllib.token_logprobs import response_logprobs

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
LORA_TARGETS = list(mp.LORA_TARGETS_ALL)


def build_model(args, dtype, device):
    """A model in `dtype` on `device`: a local folder, the tiny model, or a KNOWN_ARCHS shape with random weights."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

    if args.arch:
        a = mp.KNOWN_ARCHS[args.arch]
        kw = dict(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                  num_key_value_heads=a.kv_heads, intermediate_size=a.intermediate, vocab_size=a.vocab,
                  tie_word_embeddings=a.tied)
        cfg = Qwen3Config(head_dim=a.head_dim, **kw) if a.qk_norm else Qwen2Config(**kw)
        torch.manual_seed(0)
        with torch.device(device):
            return AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return AutoModelForCausalLM.from_pretrained(args.model_path, dtype=dtype).to(device)


def make_batch(vocab, b, p, r, device, seed=0):
    """Random prompts/responses; row 0 has half a prompt, so the padding mask path runs too."""
    g = torch.Generator().manual_seed(seed)
    t = {"prompt_ids": torch.randint(0, vocab, (b, p), generator=g), "response_ids": torch.randint(0, vocab, (b, r),
                                                                                                   generator=g),
         "prompt_len": torch.full((b,), p), "response_len": torch.full((b,), r)}
    t["prompt_len"][0] = max(1, p // 2)
    t["response_len"][-1] = max(1, r // 2)
    return {k: v.to(device) for k, v in t.items()}


def logp(model, batch, entropy=False):
    return response_logprobs(model, batch["prompt_ids"], batch["prompt_len"], batch["response_ids"],
                             batch["response_len"], with_entropy=entropy)


class Meter:
    """Wall time and (on CUDA) the allocator's peak for one phase."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    @contextlib.contextmanager
    def phase(self, out: dict, name: str):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() if self.cuda else 0
        t0 = time.perf_counter()
        yield
        if self.cuda:
            torch.cuda.synchronize()
        out[name] = {"seconds": round(time.perf_counter() - t0, 4)}
        if self.cuda:
            out[name].update(allocated_before_gib=base / mp.GIB, peak_gib=torch.cuda.max_memory_allocated() / mp.GIB,
                             peak_above_start_gib=(torch.cuda.max_memory_allocated() - base) / mp.GIB)


def train_step(model, ref, opt, batch, amp, device, kl_coeff=0.01):
    """One learner-style step: token-mean -logp*A with entropy bonus and k3 KL to the reference."""
    mask = (torch.arange(batch["response_ids"].shape[1], device=device)[None] < batch["response_len"][:, None]).float()
    with torch.autocast(device_type=device, dtype=amp):
        lp, ent = logp(model, batch, entropy=True)
        loss = -(lp * mask).sum() - 0.001 * (ent * mask).sum()
        if ref is not None:
            with torch.no_grad():
                ref_lp, _ = logp(ref, batch)
            d = ref_lp - lp
            loss = loss + kl_coeff * ((torch.exp(d) - d - 1) * mask).sum()
    (loss / mask.sum()).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


def moved_fraction(params, before) -> float:
    moved = total = 0
    for p, old in zip(params, before):
        moved += int((p.detach().cpu() != old).sum())
        total += old.numel()
    return moved / max(total, 1)


def check_full(args, device, amp, report, meter):
    model = build_model(args, torch.float32, device)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ref = build_model(args, amp, device)  # the KL reference: the same weights, frozen, in the compute dtype
    ref.load_state_dict(model.state_dict())
    ref.eval().requires_grad_(False)
    vocab = model.config.vocab_size
    batch = make_batch(vocab, args.batch, args.prompt_len, args.response_len, device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    out = report["full_finetune"] = {"params": sum(p.numel() for p in params),
                                     "master_dtype": str(next(model.parameters()).dtype)}
    with meter.phase(out, "step1"):
        train_step(model, ref, opt, batch, amp, device)
    before = [p.detach().cpu().clone() for p in params]
    with meter.phase(out, "step2"):
        out["loss"] = train_step(model, ref, opt, batch, amp, device)
    out["fraction_of_weights_moved_by_step2"] = moved_fraction(params, before)
    out["grads_finite"] = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in params)
    # score(): the bf16 copy (a sampler/reference) against the fp32 master under autocast.
    ref.load_state_dict(model.state_dict())
    model.eval()
    with meter.phase(out, "score_bf16_copy"), torch.no_grad():
        lp_ref, _ = logp(ref, batch)
    with torch.no_grad(), torch.autocast(device_type=device, dtype=amp):
        lp_master, _ = logp(model, batch)
    mask = lp_ref != 0
    out["score_max_abs_diff_bf16_copy_vs_fp32_master"] = float((lp_ref - lp_master).abs()[mask].max())
    out["score_mean_logp"] = float(lp_ref[mask].mean())
    del model, ref, opt, params, before
    _free(device)
    # The bf16-parameter baseline: the same 1e-6 AdamW step on bf16 weights.
    base = build_model(args, amp, device).train()
    bparams = [p for p in base.parameters() if p.requires_grad]
    bopt = torch.optim.AdamW(bparams, lr=args.lr, weight_decay=0.01)
    train_step(base, None, bopt, batch, amp, device)
    before = [p.detach().cpu().clone() for p in bparams]
    train_step(base, None, bopt, batch, amp, device)
    report["bf16_params_baseline"] = {"fraction_of_weights_moved_by_step2": moved_fraction(bparams, before)}
    del base, bopt, bparams, before
    _free(device)


def check_lora(args, device, amp, report, meter):
    import peft
    from peft import LoraConfig, get_peft_model

    report["peft"] = peft.__version__
    base = build_model(args, amp, device)
    batch = make_batch(base.config.vocab_size, args.batch, args.prompt_len, args.response_len, device, seed=1)
    with torch.no_grad():
        base_lp, _ = logp(base.eval(), batch)
    names = {n.split(".")[-1] for n, _ in base.named_modules()}
    targets = [t for t in LORA_TARGETS if t in names]
    model = get_peft_model(base, LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0,
                                            target_modules=targets))
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.float()  # fp32 adapters: the trained copy is the master
    model.train()
    adapters = [p for p in model.parameters() if p.requires_grad]
    frozen = {n: p.detach().cpu().clone() for n, p in model.named_parameters() if not p.requires_grad}
    opt = torch.optim.AdamW(adapters, lr=args.lora_lr, weight_decay=0.01)
    out = report["lora"] = {"r": args.lora_r, "target_modules": targets,
                            "adapter_params": sum(p.numel() for p in adapters),
                            "base_params": sum(v.numel() for v in frozen.values())}
    with meter.phase(out, "step1"):
        train_step(model, None, opt, batch, amp, device)  # KL reference: adapters off (below)
    before = [p.detach().cpu().clone() for p in adapters]
    with meter.phase(out, "step2"):
        with torch.no_grad(), model.disable_adapter():
            logp(model, batch)  # the reference pass the learner runs, for the peak
        train_step(model, None, opt, batch, amp, device)
    out["fraction_of_adapter_weights_moved_by_step2"] = moved_fraction(adapters, before)
    out["base_weights_changed"] = sum(int((p.detach().cpu() != frozen[n]).sum())
                                      for n, p in model.named_parameters() if not p.requires_grad)
    model.eval()
    with torch.no_grad():
        with model.disable_adapter():
            off_lp, _ = logp(model, batch)
        on_lp, _ = logp(model, batch)
    out["adapters_off_max_abs_diff_vs_base"] = float((off_lp - base_lp).abs().max())
    out["adapters_on_max_abs_diff_vs_base"] = float((on_lp - base_lp).abs().max())
    del model, base, opt, adapters, frozen, before
    _free(device)


def check_fsdp(args, device, amp, report, meter):
    """One sharded step on a one-rank process group (nccl on CUDA, gloo on CPU) beside the plain step."""
    import socket

    import torch.distributed as dist

    from opid_rllib import sharding

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)
    try:
        plain = build_model(args, torch.float32, device).train()
        model = build_model(args, torch.float32, device).train()
        model.load_state_dict(plain.state_dict())
        if args.gradient_checkpointing:
            for m in (plain, model):
                m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        sharding.shard_model(model, amp)
        batch = make_batch(plain.config.vocab_size, args.batch, args.prompt_len, args.response_len, device, seed=2)
        out = report["fsdp_single_rank"] = {"blocks": len(sharding.decoder_blocks(plain))}
        norms, losses = {}, {}
        for name, m in (("plain", plain), ("fsdp", model)):
            opt = torch.optim.AdamW(m.parameters(), lr=args.lr, weight_decay=0.01)
            step = opt.step

            def step_with_norm(*a, m=m, name=name, step=step, **kw):  # the norm over every (sharded) gradient
                norms[name] = float(sharding.global_norm(p.grad for p in m.parameters()))
                return step(*a, **kw)

            opt.step = step_with_norm
            with meter.phase(out, f"step_{name}"):
                losses[name] = train_step(m, None, opt, batch, amp, device)
        with meter.phase(out, "gather_whole_weights"):
            whole, out["gather_seconds"] = sharding.full_state(model)
        out["loss"], out["grad_norm"] = losses, norms
        out["weights_max_abs_diff_vs_plain"] = max(float((whole[k].to(device) - v).abs().max())
                                                   for k, v in plain.state_dict().items() if k in whole)
        out["local_shard_bytes"] = sharding.local_bytes(model.parameters())
        del plain, model, whole
    finally:
        dist.destroy_process_group()
    _free(device)


def plan_estimate(args, arch) -> dict:
    """The memory plan's learner rows for the shape this check ran (GiB)."""
    def learner(lora):
        p = mp.PlanInput(args.arch or "local", micro_batch_size=args.batch, max_prompt_len=args.prompt_len,
                         max_new_tokens=args.response_len, gradient_checkpointing=args.gradient_checkpointing,
                         lora={"r": args.lora_r} if lora else None, dtype=args.dtype, kl_coeff=0.0 if lora else 0.01)
        rows = mp.compute_plan(p, arch)["devices"]["learner GPU"]
        rows.pop("reserve (CUDA context, fragmentation)")
        return {"rows": rows, "total_without_reserve": sum(rows.values())}
    return {"full_finetune": learner(False), "lora": learner(True)}


def _free(device):
    import gc

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny", help="tiny | local HF folder")
    ap.add_argument("--arch", choices=sorted(mp.KNOWN_ARCHS), help="random weights in a recipe model's shape")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"], help="autocast / copies dtype")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--response-len", type=int, default=64)
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--lora-r", type=int, default=8)
    ap.add_argument("--lora-lr", type=float, default=1e-4)
    ap.add_argument("--skip-lora", action="store_true")
    ap.add_argument("--skip-full", action="store_true", help="no full fine-tuning phase (a 7B needs ~16 B/param)")
    ap.add_argument("--skip-fsdp", action="store_true", help="no single-rank FSDP2 step")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ap.add_argument("--out", help="write the report as JSON here")
    args = ap.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cpu":
        print("gpu_check: no CUDA device: running on CPU (no peak-memory figures)", file=sys.stderr)
    amp = DTYPES[args.dtype]
    if not args.arch:
        from opid_rllib.models import resolve_model

        args.model_path = str(resolve_model(args.model))
    arch = mp.KNOWN_ARCHS[args.arch] if args.arch else mp.resolve_arch(args.model_path)
    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor()
    report = {"device": device, "device_name": name,
              "torch": torch.__version__, "python": platform.python_version(),
              "model": args.arch or args.model, "dtype": args.dtype,
              "shape": {"batch": args.batch, "prompt_len": args.prompt_len, "response_len": args.response_len,
                        "gradient_checkpointing": args.gradient_checkpointing},
              "ray_imported": "ray" in sys.modules and sys.modules["ray"] is not None}
    import transformers

    report["transformers"] = transformers.__version__
    meter = Meter(device)
    if not args.skip_full:
        check_full(args, device, amp, report, meter)
    if not args.skip_fsdp:
        check_fsdp(args, device, amp, report, meter)
    try:
        import peft  # noqa: F401
    except ImportError:
        args.skip_lora = True
        report["lora"] = {"skipped": "peft is not installed (pip install peft)"}
    if not args.skip_lora:
        check_lora(args, device, amp, report, meter)
    report["plan_estimate_gib"] = est = plan_estimate(args, arch)
    if device == "cuda":  # the second step runs with optimizer state allocated: the steady state
        report["measured_vs_plan_gib"] = {
            k: {"measured_step2_peak": report[k]["step2"]["peak_gib"], "plan": est[k]["total_without_reserve"]}
            for k in ("full_finetune", "lora") if "step2" in report.get(k, {})}
    report["ray_imported"] = report["ray_imported"] or ("ray" in sys.modules and sys.modules["ray"] is not None)
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
