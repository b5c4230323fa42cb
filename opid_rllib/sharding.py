"""FSDP2 sharding of the policy across learners (`OPIDConfig.sharding="fsdp"`).

Why: a replicated learner holds the whole model, its fp32 masters, gradients and AdamW state (16 B per parameter),
so full fine-tuning stops at what one GPU holds; sharded, each of N learners holds 1/N of them and gathers one
decoder block at a time for compute. RLlib's TorchLearner only knows DDP, so this is ours.

Every function here that gathers is a collective: every rank must call it, in the same order.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterable

import torch
import torch.distributed as dist


def decoder_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks: modules whose class transformers names in `_no_split_modules` (the unit that
    accelerate, TRL and verl wrap), in module order."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise ValueError(f"{type(model).__name__}: no decoder blocks found (its _no_split_modules is {names or None})")
    return blocks


def shard_model(model: torch.nn.Module, compute_dtype: torch.dtype) -> torch.nn.Module:
    """fully_shard each decoder block, then the root (embeddings, final norm, tied head). Parameters stay fp32
    masters (sharded, as AdamW's state then is); compute gathers them in `compute_dtype`; gradients are
    reduce-scattered in fp32 and averaged over the ranks, as the all-reduce path averages them."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=None if compute_dtype == torch.float32 else compute_dtype,
                              reduce_dtype=torch.float32)
    for block in decoder_blocks(model):
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def fsdp_modules(model: torch.nn.Module) -> list:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def gathered(model: torch.nn.Module):
    """Inside, the whole model is unsharded and stays so across any number of forwards, so ranks may run different
    numbers of no-grad passes (the re-score scores each rank's own rows) with no collective in between; a no-op for
    an unsharded model. One all-gather per block on entry, on every rank."""
    mods = fsdp_modules(model)
    if not mods:
        yield model
        return
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
    for m in mods:
        m.unshard()
    try:
        yield model
    finally:
        for m in mods:
            m.reshard()
            m.set_reshard_after_forward(m is not model, recurse=False)  # fully_shard's defaults: the root keeps its


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def global_norm(grads: Iterable[torch.Tensor | None]) -> torch.Tensor:
    """L2 norm over every gradient of the model, sharded ones included (each rank's shard squares, summed over the
    ranks): clipping by it is clipping the whole model, not each rank's shard. Non-finite norms map to +-1e9 as
    RLlib's does."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return torch.tensor(0.0)
    sq = torch.stack([_local(g).detach().float().pow(2).sum() for g in grads]).sum()
    if any(hasattr(g, "to_local") for g in grads):
        dist.all_reduce(sq)
    return sq.sqrt().nan_to_num(neginf=-10e8, posinf=10e8)


def clip_by_global_norm(grads: dict, grad_clip: float | None, grad_clip_by: str = "global_norm"):
    """RLlib's clip_gradients with the norm over the whole sharded model; returns the norm (None unless global)."""
    if grad_clip is None:
        return None
    if grad_clip_by != "global_norm":
        from ray.rllib.utils.torch_utils import clip_gradients

        return clip_gradients(grads, grad_clip=grad_clip, grad_clip_by=grad_clip_by)
    total = global_norm(grads.values())
    coeff = torch.clamp(grad_clip / torch.clamp(total + 1e-6, min=grad_clip), max=1.0)
    for g in grads.values():
        if g is not None:
            g.detach().mul_(coeff.to(g.device))
    return total


def full_state(model: torch.nn.Module, dtype: torch.dtype | None = None) -> tuple[dict, float]:
    """(the whole model's state dict as plain CPU tensors, seconds it took): every rank gathers, every rank gets
    it. `dtype` casts floating tensors (the samplers' compute dtype)."""
    t0 = time.perf_counter()
    out, seen = {}, set()
    # keep_vars: the Parameter objects themselves, so a tied pair is one object on every rank (a local shard's
    # data_ptr is rank-dependent: an empty shard's is 0), and every rank gathers the same keys
    for k, v in model.state_dict(keep_vars=True).items():
        if id(v) in seen:  # tied embedding / lm_head: once, as LLMRLModule.get_state ships it
            continue
        seen.add(id(v))
        v = v.full_tensor() if hasattr(v, "full_tensor") else v
        v = v.detach()
        out[k] = (v.to(dtype) if dtype is not None and v.is_floating_point() else v).cpu().clone()
    return out, time.perf_counter() - t0


def full_optimizer_state(optim: torch.optim.Optimizer) -> dict:
    """The optimizer's state_dict with every sharded state tensor gathered whole, on CPU (every rank calls it)."""
    sd = optim.state_dict()
    state = {idx: {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu().clone()
                   if isinstance(v, torch.Tensor) else v for k, v in st.items()}
             for idx, st in sd["state"].items()}
    return {**sd, "state": state}


def shard_optimizer_state(optim: torch.optim.Optimizer) -> None:
    """After loading a whole optimizer state: each sharded parameter's state tensors become this rank's slice."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    for p, st in optim.state.items():
        if not isinstance(p, DTensor):
            continue
        for k, v in st.items():
            if isinstance(v, torch.Tensor) and not isinstance(v, DTensor) and v.shape == p.shape:
                st[k] = distribute_tensor(v.to(p.device), p.device_mesh, p.placements, src_data_rank=None)


def load_full_state(model: torch.nn.Module, state: dict) -> None:
    """Copy a whole-model state dict into the model's shards: each rank keeps its own slice (no collective)."""
    from torch.distributed.tensor import distribute_tensor

    own = model.state_dict()
    for k, v in state.items():
        if k not in own:
            continue
        dst = own[k]
        if hasattr(dst, "to_local"):
            src = distribute_tensor(v.to(dst.dtype), dst.device_mesh, dst.placements, src_data_rank=None)
            dst.to_local().copy_(src.to_local())
        else:
            dst.copy_(v)


def local_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes this rank holds of `tensors` (a sharded tensor counts its own shard only)."""
    return sum(_local(t).numel() * _local(t).element_size() for t in tensors)
