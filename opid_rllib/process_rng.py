"""One process's global random generators as plain data, so a checkpoint can carry them.

Why: rollouts sample with torch's global generator (HF `generate`), teacher samples draw from it on the
learners, and Ray seeds every process from `config.seed` when it starts. A run resumed from a checkpoint
without these replays the draws its processes made in iteration 1 instead of going on with the stream the
uninterrupted run would have used. Bytes and lists only (no tensors), so msgpack checkpoints hold them too.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def capture() -> dict:
    """torch's (CPU and, where present, every CUDA device's), numpy's and Python's global generator states."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state().numpy().tobytes(),
             "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(gauss)],
             "python": _to_lists(random.getstate())}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [s.numpy().tobytes() for s in torch.cuda.get_rng_state_all()]
    return state


def restore(state: dict | None) -> None:
    """Set this process's generators to `capture()`'s output; None (an older checkpoint) leaves them alone.
    CUDA states are set only where this process sees as many devices as the one that saved them."""
    if not state:
        return
    torch.set_rng_state(torch.frombuffer(bytearray(state["torch"]), dtype=torch.uint8))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    random.setstate(_to_tuples(state["python"]))
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all([torch.frombuffer(bytearray(s), dtype=torch.uint8) for s in cuda])


def _to_lists(x):
    return [_to_lists(v) for v in x] if isinstance(x, (tuple, list)) else x


def _to_tuples(x):
    return tuple(_to_tuples(v) for v in x) if isinstance(x, (tuple, list)) else x
