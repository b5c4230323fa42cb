"""Checkpoint -> a plain Hugging Face folder that `opid-eval`, transformers and `vllm serve` open
(LoRA runs: adapters merged into the base weights)."""

from __future__ import annotations

import os
from pathlib import Path

MODULE_SUBDIR = os.path.join("learner_group", "learner", "rl_module", "default_policy")


def export_checkpoint(checkpoint: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Load the learner's policy module from an OPID checkpoint and save model + tokenizer."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    ckpt = Path(checkpoint).expanduser().resolve()
    module_dir = ckpt / MODULE_SUBDIR
    if not module_dir.is_dir():
        raise FileNotFoundError(f"checkpoint={ckpt}: no policy module at {MODULE_SUBDIR}; pass the directory "
                                "written by opid-train (checkpoint_XXXXX) or Algorithm.save_to_path")
    return save_policy(RLModule.from_checkpoint(str(module_dir)), out_dir)


def save_policy(module, out_dir: str | os.PathLike) -> Path:
    """An LLMRLModule's policy as a plain Hugging Face folder (model + tokenizer). It changes the module: LoRA
    adapters are merged into the base, and fp32 masters are cast to the run's dtype (what vLLM serves)."""
    from opid_rllib.models.cache import quiet_progress
    from opid_rllib.models.lora import is_lora

    out = Path(out_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = module.model.merge_and_unload() if is_lora(module.model) else module.model  # LoRA: merged folder
    model.to(module.compute_dtype)
    with quiet_progress():
        model.save_pretrained(out)
    module.tokenizer.save_pretrained(out)
    return out
