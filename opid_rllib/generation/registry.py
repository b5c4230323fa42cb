"""The generation-backend factory (hf or vllm by name): apart from base.py, which both backends import."""

from __future__ import annotations

from typing import Any

from opid_rllib.generation.base import GenerationBackend

# The one list of backend names (config validation and CLI choices read it).
BACKENDS = ("hf", "vllm")


def make_backend(name: str, *, model_path: str, **kwargs: Any) -> GenerationBackend:
    if name == "hf":
        from opid_rllib.generation.hf import HFBackend

        return HFBackend(model_path=model_path, **kwargs)
    if name == "vllm":
        from opid_rllib.generation.vllm import VLLMBackend

        return VLLMBackend(model_path=model_path, **kwargs)
    raise ValueError(f"generation_backend={name!r}: unknown; use one of {BACKENDS} ('hf' is the CPU default)")
