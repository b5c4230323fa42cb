"""GPU memory plan for a config: what each learner and sampler device holds, and whether it fits.

    python -m opid_rllib.memory_plan tuned_examples/alfworld_opid_qwen3_1_7b_gpu.py
    opid-train --model Qwen/Qwen3-1.7B ... --plan

Pure arithmetic (no Ray, no torch): parameter counts from the architecture (config.json of a local
folder, or the small table below for the recipes' hub models, whose weights are not here).

The design modelled (the learner's mixed precision):
  * full fine-tuning: fp32 master weights (4 B/param), fp32 grads (4), AdamW m and v in fp32 (8),
    bf16 autocast copies of the weights alive during forward/backward (2), a frozen bf16 KL
    reference model (2) when kl_coeff > 0;
  * LoRA: frozen base in the config dtype (bf16: 2 B/param), fp32 adapters with fp32 grads and
    AdamW state; the KL reference is the same model with adapters disabled (no second copy);
  * sharded learners (sharding="fsdp", N learners): masters, grads and AdamW state divided by N; the
    gathered weights on top: the root unit (embeddings, head, final norm) for the whole pass, two decoder
    blocks (the one computing and the one prefetched) in the config dtype and one unit's fp32 gradient before
    its reduce-scatter; the re-score before the update gathers the whole model in the config dtype, counted
    where its peak (with the score pass) passes the training pass's; the KL reference stays a whole copy per
    learner (no collective per pass);
  * samplers: a bf16 HF copy plus its KV cache on the env runner's GPU, or a vLLM engine that
    claims gpu_memory_utilization x card memory (weights + KV cache + its own activations).

Activations (bytes, saved for backward by one micro-batch of B rows, all at the worst-case length
T = max_prompt_len + max_new_tokens, R = max_new_tokens response positions, bf16 autocast):
  per layer per token, no checkpointing (h hidden, i intermediate, q = heads*head_dim,
  kv = kv_heads*head_dim, n/nk heads/kv heads, r LoRA rank, m LoRA target modules):
      Qwen3 full  26h + 8i + 14q + 6kv + 8n + 4nk + 8      (fp32 residual stream: fp32 master weights)
      Qwen3 LoRA  18h + 8i + 14q + 4kv + 8n + 4nk + 8 + 2rm (bf16 residual stream)
      Qwen2 full  26h + 8i +  8q        + 4n       + 8     (no q/k norm; k, v saved as repeated heads)
      Qwen2 LoRA  18h + 8i + 10q        + 4n       + 8 + 2rm
    + 2T for the bf16 copy of the B x T x T padding mask SDPA keeps per layer (any padded row);
  with checkpointing: 4h (full) / 2h (LoRA) per layer per token (the layer input), plus one layer's
    no-checkpoint activations alive while it is recomputed in backward;
  model level: 8h per token (final norm, fp32) + 8 head_dim per token (rope cos/sin) + 2h per
    kept lm-head position + the logits: B x R x V elements x 8 B saved (fp32 log_softmax and its exp,
    for the entropy) and about 18 B at the peak (bf16 logits + fp32 copy / temperature + the KL
    reference's log_softmax, which runs while the policy's are alive). With Qwen's 152k vocabulary the
    logits term dominates.
The per-layer coefficients were measured by counting the storages autograd saves (torch 2.13,
transformers 5.19, CPU autocast; tests/plan checks them against that measurement). Approximate:
the fp32 transients at the peak, CUDA kernels that save more or less than the CPU ones, the allocator's
fragmentation and the CUDA context (a flat RESERVE_GIB), vLLM's own activation/graph memory inside its
share. bench/gpu_check.py measures the real peak on a GPU next to this estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace

GIB = 1024 ** 3
RESERVE_GIB = 2.0  # CUDA context + allocator slack per device (approximate)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
LORA_TARGETS_ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Arch:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    qkv_bias: bool
    qk_norm: bool  # Qwen3: per-head RMSNorm on q and k


# The recipes' models (values from their config.json), since no weights can be fetched here.
KNOWN_ARCHS = {
    "Qwen/Qwen3-1.7B": Arch(2048, 28, 16, 8, 128, 6144, 151936, True, False, True),
    "Qwen/Qwen2.5-3B-Instruct": Arch(2048, 36, 16, 2, 128, 11008, 151936, True, True, False),
    "Qwen/Qwen2.5-7B-Instruct": Arch(3584, 28, 28, 4, 128, 18944, 152064, False, True, False),
}


def arch_from_hf_config(c) -> Arch:
    """An Arch from a transformers config (Qwen2/Qwen3/Llama-style decoders)."""
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return Arch(c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                getattr(c, "num_key_value_heads", None) or c.num_attention_heads, head_dim, c.intermediate_size,
                c.vocab_size, bool(getattr(c, "tie_word_embeddings", False)),
                bool(getattr(c, "attention_bias", c.model_type == "qwen2")), c.model_type == "qwen3")


def resolve_arch(model: str) -> Arch:
    """A model spec as opid-train takes it: a KNOWN_ARCHS hub id, "tiny", a local folder, a cached hub id."""
    if model in KNOWN_ARCHS:
        return KNOWN_ARCHS[model]
    from transformers import AutoConfig

    from opid_rllib.models import resolve_model

    try:
        path = resolve_model(model)
    except Exception as e:  # noqa: BLE001  (one line, names the fix)
        raise ValueError(f"model={model!r}: no local config.json ({e}); use a local folder or one of "
                         f"{sorted(KNOWN_ARCHS)}") from None
    return arch_from_hf_config(AutoConfig.from_pretrained(str(path)))


def param_counts(a: Arch) -> dict[str, int]:
    """Exact parameter counts of a Qwen2/Qwen3/Llama decoder (embedding, layers, norm, lm head)."""
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    attn = a.hidden * (q + 2 * kv) + q * a.hidden + (q + 2 * kv if a.qkv_bias else 0)
    attn += 2 * a.head_dim if a.qk_norm else 0
    layer = attn + 3 * a.hidden * a.intermediate + 2 * a.hidden
    embed = a.vocab * a.hidden
    out = {"embedding": embed, "layers": layer * a.layers, "final_norm": a.hidden,
           "lm_head": 0 if a.tied else embed}
    out["total"] = sum(out.values())
    return out


def lora_param_count(a: Arch, r: int, targets=LORA_TARGETS_ALL) -> int:
    """r * (in + out) per targeted linear per layer (peft's A: in x r, B: r x out)."""
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    shapes = {"q_proj": (a.hidden, q), "k_proj": (a.hidden, kv), "v_proj": (a.hidden, kv), "o_proj": (q, a.hidden),
              "gate_proj": (a.hidden, a.intermediate), "up_proj": (a.hidden, a.intermediate),
              "down_proj": (a.intermediate, a.hidden)}
    unknown = sorted(set(targets) - set(shapes))
    if unknown:
        raise ValueError(f"lora target_modules {unknown}: not a decoder linear; use some of {list(shapes)}")
    return a.layers * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)


def layer_activation_bytes_per_token(a: Arch, *, lora: bool, lora_r: int = 0, lora_targets: int = 0,
                                     seq_len: int = 0) -> float:
    """Bytes one layer saves for backward per token without checkpointing (coefficients: module doc)."""
    h, i, q, kv = a.hidden, a.intermediate, a.heads * a.head_dim, a.kv_heads * a.head_dim
    if a.qk_norm:
        b = (18 if lora else 26) * h + 8 * i + 14 * q + (4 if lora else 6) * kv + 8 * a.heads + 4 * a.kv_heads + 8
    else:
        b = (18 if lora else 26) * h + 8 * i + (10 if lora else 8) * q + 4 * a.heads + 8
    return b + (2 * lora_r * lora_targets if lora else 0) + 2 * seq_len


def activation_bytes(a: Arch, *, batch: int, prompt: int, response: int, checkpointing: bool, lora: bool,
                     lora_r: int = 0, lora_targets: int = 0, peak: bool = True) -> float:
    """Activations of one training micro-batch; peak=False gives only what is saved for backward
    (the quantity tests/plan measures), peak=True adds the transients at the peak."""
    t = prompt + response
    tokens = batch * t
    layer = layer_activation_bytes_per_token(a, lora=lora, lora_r=lora_r, lora_targets=lora_targets, seq_len=t)
    if checkpointing:
        layers = a.layers * tokens * (2 if lora else 4) * a.hidden + (layer * tokens if peak else 0)
    else:
        layers = a.layers * tokens * layer
    logit_elems = batch * response * a.vocab
    model = tokens * ((2 if lora else 8) * a.hidden + (4 if lora else 8) * a.head_dim)
    model += 2 * a.hidden * batch * (response + 1) + (18 if peak else 8) * logit_elems
    return layers + model


def score_pass_bytes(a: Arch, *, batch: int, prompt: int, response: int) -> float:
    """A no-grad score()/reference pass: bf16 logits + fp32 copy + log_softmax (10 B per element) and
    one layer's transients; it never overlaps the training micro-batch's peak."""
    t = prompt + response
    return 10 * batch * response * a.vocab + batch * t * layer_activation_bytes_per_token(a, lora=True, seq_len=t)


@dataclass
class PlanInput:
    model: str
    micro_batch_size: int = 8
    max_prompt_len: int = 2048
    max_new_tokens: int = 512
    gradient_checkpointing: bool = False
    lora: dict | None = None  # {"r", "alpha", "target_modules"}
    kl_coeff: float = 0.01
    dtype: str = "bfloat16"
    num_learners: int = 1
    num_gpus_per_learner: float = 1
    num_env_runners: int = 0
    num_gpus_per_env_runner: float = 0
    generation_backend: str = "hf"
    gpu_memory_utilization: float = 0.6
    score_micro_batch_size: int = 8
    rollouts_per_iter: int = 128  # tasks_per_iter * group_size
    gpu_mem_gib: float = 80.0
    sharding: str = "none"  # "fsdp": weights, grads and AdamW state split over the num_learners


def sharded_learners(p: PlanInput) -> int:
    """How many learners share the policy's state (1: each holds it whole)."""
    return max(1, int(p.num_learners)) if p.sharding == "fsdp" else 1


def gathered_block_bytes(a: Arch, wb: int) -> float:
    """What a sharded learner gathers on top of its shards in forward/backward (module doc): the root unit, two
    blocks in the config dtype (wb bytes per parameter) and one unit's fp32 gradient."""
    counts = param_counts(a)
    block = counts["layers"] / a.layers
    root = counts["total"] - counts["layers"]
    return wb * root + 2 * wb * block + 4 * max(block, root)


def _devices(p: PlanInput, a: Arch):
    """(devices {name: {row: bytes}}, notes, activation bytes with/without checkpointing)."""
    n = param_counts(a)["total"]
    wb = DTYPE_BYTES.get(p.dtype, 2)
    lora = bool(p.lora)
    targets = tuple(p.lora.get("target_modules", LORA_TARGETS_ALL)) if lora else ()
    r = int(p.lora.get("r", 8)) if lora else 0
    n_train = lora_param_count(a, r, targets) if lora else n
    shards = sharded_learners(p)
    if shards > 1:
        learner = {f"weights (fp32 masters, 1/{shards})": 4 * n / shards,
                   f"gradients (1/{shards})": 4 * n / shards,
                   f"optimizer (AdamW m, v fp32, 1/{shards})": 8 * n / shards,
                   "gathered blocks (forward/backward)": gathered_block_bytes(a, wb)}
    else:
        learner = {
            "weights": (wb * n + 4 * n_train) if lora else 4 * n,
            "gradients": 4 * n_train,
            "optimizer (AdamW m, v fp32)": 8 * n_train,
            "bf16 compute copies (autocast)": 2 * n_train,
        }
    ref = "KL reference (LoRA: adapters off, shared)" if lora else f"KL reference model ({p.dtype})"
    learner[ref] = 0 if (lora or p.kl_coeff <= 0) else wb * n
    kw = dict(batch=p.micro_batch_size, prompt=p.max_prompt_len, response=p.max_new_tokens, lora=lora,
              lora_r=r, lora_targets=len(targets))
    act = {ck: activation_bytes(a, checkpointing=ck, **kw) for ck in (False, True)}
    learner["activations"] = act[p.gradient_checkpointing]
    score = score_pass_bytes(a, batch=p.score_micro_batch_size, prompt=p.max_prompt_len, response=p.max_new_tokens)
    if shards > 1:  # the re-score gathers the whole model; its peak may pass the training pass's
        rescore = wb * n + score - learner["gathered blocks (forward/backward)"] - learner["activations"]
        learner["whole model gathered to re-score (excess)"] = max(0.0, rescore)
    learner["reserve (CUDA context, fragmentation)"] = RESERVE_GIB * GIB
    t = p.max_prompt_len + p.max_new_tokens
    kv_per_token = 2 * a.layers * a.kv_heads * a.head_dim * wb
    per_runner = -(-p.rollouts_per_iter // max(1, p.num_env_runners))
    sampler: dict[str, float] = {}
    notes = []
    if p.generation_backend == "vllm":
        share = p.gpu_memory_utilization * p.gpu_mem_gib * GIB
        sampler["vLLM share (gpu_memory_utilization)"] = share
        kv_room = share - wb * n
        notes.append(f"vLLM: weights {wb * n / GIB:.1f} GiB of its {share / GIB:.1f} GiB share, KV cache room "
                     f"<= {kv_room / GIB:.1f} GiB = {max(0, kv_room) / kv_per_token / 1e3:.0f}k tokens (less vLLM's "
                     f"own activations); {per_runner} rollouts x {t} tokens per env runner need "
                     f"{per_runner * t / 1e3:.0f}k (more only queues requests)")
    else:
        sampler["sampler weights (bf16 HF copy)"] = wb * n
        sampler["KV cache (all rollouts at full length)"] = per_runner * t * kv_per_token
        sampler["reserve (CUDA context, fragmentation)"] = RESERVE_GIB * GIB
    colocated = 0 < p.num_gpus_per_env_runner and p.num_gpus_per_env_runner + p.num_gpus_per_learner <= 1
    devices = {}
    if colocated:
        devices["learner + sampler GPU (shared)"] = {**learner, **{f"sampler: {k}": v for k, v in sampler.items()
                                                                    if not k.startswith("reserve")}}
    else:
        devices["learner GPU"] = learner
        if p.num_gpus_per_env_runner > 0 and p.num_env_runners > 0:
            devices["env runner GPU"] = sampler
        else:
            notes.append("sampler: env runners get no GPU (num_gpus_per_env_runner=0 or no remote runners)")
    if p.num_gpus_per_learner <= 0:
        notes.append("learner: num_gpus_per_learner=0 runs it on CPU; the learner rows are what one GPU would hold")
    if score > act[p.gradient_checkpointing] and shards == 1:
        notes.append(f"score()/re-scoring pass ({score / GIB:.1f} GiB) exceeds the training activations: "
                     "lower score_micro_batch_size")
    return devices, notes, act, n, n_train


def compute_plan(p: PlanInput, arch: Arch | None = None) -> dict:
    """Per-device rows in GiB, the totals and whether each device fits (see the module doc)."""
    a = arch or resolve_arch(p.model)
    devices, notes, act, n, n_train = _devices(p, a)
    budget = p.gpu_mem_gib * GIB
    return {"model": p.model, "arch": asdict(a), "params": n, "trainable_params": n_train, "input": asdict(p),
            "devices": {k: {r_: v / GIB for r_, v in rows.items()} for k, rows in devices.items()},
            "totals_gib": {k: sum(rows.values()) / GIB for k, rows in devices.items()},
            "activations_gib": {"no checkpointing": act[False] / GIB, "checkpointing": act[True] / GIB},
            "fits": {k: sum(rows.values()) <= budget for k, rows in devices.items()}, "gpu_mem_gib": p.gpu_mem_gib,
            "notes": notes, "max_micro_batch_that_fits": _max_micro_batch(p, a)}


def _max_micro_batch(p: PlanInput, a: Arch) -> int:
    """Largest micro_batch_size <= 1024 for which the learner's device fits (0: not even one row)."""
    def ok(b):
        devices = _devices(replace(p, micro_batch_size=b), a)[0]
        return sum(next(iter(devices.values())).values()) <= p.gpu_mem_gib * GIB

    lo, hi = 0, 1024
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def plan_input_from_config(cfg, gpu_mem_gib: float = 80.0, lora: dict | None = None) -> PlanInput:
    """PlanInput from an OPIDConfig (duck-typed: any object with its attribute names)."""
    g = lambda k, d=None: getattr(cfg, k, d)  # noqa: E731
    kw = g("backend_kwargs", {}) or {}
    return PlanInput(
        model=str(g("llm_model", "tiny")), micro_batch_size=int(g("micro_batch_size", 8)),
        max_prompt_len=int(g("max_prompt_len", 2048)), max_new_tokens=int(g("max_new_tokens", 512)),
        gradient_checkpointing=bool(g("gradient_checkpointing", False)), lora=g("lora", None) or lora,
        kl_coeff=float(g("kl_coeff", 0.01)), dtype=str(g("dtype", "bfloat16")),
        num_learners=int(g("num_learners", 0) or 0), num_gpus_per_learner=float(g("num_gpus_per_learner", 0) or 0),
        num_env_runners=int(g("num_env_runners", 0) or 0),
        num_gpus_per_env_runner=float(g("num_gpus_per_env_runner", 0) or 0),
        generation_backend=str(g("generation_backend", "hf")),
        gpu_memory_utilization=float(kw.get("gpu_memory_utilization", 0.6)),
        score_micro_batch_size=int(g("score_micro_batch_size", 8)),
        rollouts_per_iter=int(g("tasks_per_iter", 16)) * int(g("group_size", 8)), gpu_mem_gib=gpu_mem_gib,
        sharding=str(g("sharding", "none")))


def format_plan(plan: dict) -> str:
    """The plan as a plain-text table (GiB)."""
    p = plan["input"]
    lora = p["lora"]
    lines = [f"Memory plan: {plan['model']} ({plan['params'] / 1e9:.2f}B params"
             + (f", LoRA r={lora.get('r')} on {len(lora.get('target_modules', LORA_TARGETS_ALL))} modules: "
                f"{plan['trainable_params'] / 1e6:.1f}M trainable" if lora else ", full fine-tuning") + ")",
             f"  micro_batch_size={p['micro_batch_size']} x (prompt {p['max_prompt_len']} + response "
             f"{p['max_new_tokens']}) tokens, gradient_checkpointing={p['gradient_checkpointing']}, "
             f"{p['num_learners'] or 'local'} learner(s) x {p['num_gpus_per_learner']} GPU"
             f"{' sharded (fsdp)' if p.get('sharding') == 'fsdp' else ''}, "
             f"{p['num_env_runners']} env runner(s) x {p['num_gpus_per_env_runner']} GPU, "
             f"sampler={p['generation_backend']}, {plan['gpu_mem_gib']:.0f} GiB cards"]
    for dev, rows in plan["devices"].items():
        lines.append(f"  {dev}:")
        for name, gib in rows.items():
            lines.append(f"    {name:<44}{gib:8.1f} GiB")
        total = plan["totals_gib"][dev]
        verdict = "fits" if plan["fits"][dev] else "DOES NOT FIT"
        lines.append(f"    {'total':<44}{total:8.1f} GiB  {verdict} ({plan['gpu_mem_gib'] - total:+.1f} GiB free)")
    act = plan["activations_gib"]
    lines.append(f"  activations: {act['no checkpointing']:.1f} GiB without / {act['checkpointing']:.1f} GiB with "
                 "gradient checkpointing (worst case: every row at full length)")
    lines.append(f"  largest micro_batch_size that fits the learner GPU: {plan['max_micro_batch_that_fits']}")
    lines += [f"  note: {n}" for n in plan["notes"]]
    return "\n".join(lines)


def load_recipe(path: str):
    """(config, lora) from a tuned_examples file: its `config`, and `LORA` when the config has no lora key."""
    import os
    import runpy

    if not os.path.isfile(path):
        raise ValueError(f"recipe {path!r}: no such file (give a tuned_examples/*.py path)")
    ns = runpy.run_path(path, run_name="opid_memory_plan")
    if "config" not in ns:
        raise ValueError(f"recipe {path!r}: defines no `config`")
    return ns["config"], ns.get("LORA")


def print_config_plan(cfg, gpu_mem_gib: float = 80.0, lora: dict | None = None) -> int:
    """`opid-train --plan` / `python RECIPE.py --plan`: print the table, 0 when every device fits.

    Without a `lora` setting in the config, a recipe run as a script may declare a module-level LORA.
    """
    lora = lora or getattr(sys.modules.get("__main__"), "LORA", None)
    try:
        plan = compute_plan(plan_input_from_config(cfg, gpu_mem_gib, lora))
    except ValueError as e:
        print(f"memory plan: {e}", file=sys.stderr)
        return 2
    print(format_plan(plan))
    return 0 if all(plan["fits"].values()) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m opid_rllib.memory_plan", description=__doc__.split("\n")[0])
    ap.add_argument("recipe", nargs="*", help="tuned_examples/*.py files (each builds `config`)")
    ap.add_argument("--model", help="no recipe: plan this model with PlanInput defaults and the flags below")
    ap.add_argument("--micro-batch-size", type=int)
    ap.add_argument("--gradient-checkpointing", action="store_true", default=None)
    ap.add_argument("--gpu-mem-gib", type=float, default=80.0, help="memory per card")
    ap.add_argument("--json", action="store_true", help="print the plans as JSON")
    args = ap.parse_args(argv)
    if not args.recipe and not args.model:
        ap.error("give a recipe file or --model")
    inputs = []
    try:
        for path in args.recipe:
            cfg, lora = load_recipe(path)
            inputs.append(plan_input_from_config(cfg, args.gpu_mem_gib, lora))
        if args.model:
            inputs.append(PlanInput(args.model, gpu_mem_gib=args.gpu_mem_gib))
        over = {k: v for k, v in {"micro_batch_size": args.micro_batch_size,
                                  "gradient_checkpointing": args.gradient_checkpointing}.items() if v is not None}
        plans = [compute_plan(replace(p, **over)) for p in inputs]
    except ValueError as e:
        print(f"memory plan: {e}", file=sys.stderr)
        return 2
    print(json.dumps(plans, indent=1) if args.json else "\n\n".join(format_plan(p) for p in plans))
    return 0


if __name__ == "__main__":
    sys.exit(main())
