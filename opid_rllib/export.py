"""Checkpoint -> a plain Hugging Face folder that `opid-eval`, transformers and `vllm serve` open
(LoRA runs: adapters merged into the base weights)."""

from __future__ import annotations

import os
from pathlib import Path

MODULE_SUBDIR = os.path.join("learner_group", "learner", "rl_module", "default_policy")


def checkpoint_problem(checkpoint: str | os.PathLike) -> str | None:
    """What is wrong with `checkpoint` as opid-export's input, in one line naming the fix (None: it is one).

    Why: given a folder that did not exist (a run saved no checkpoint) or a run folder, the message spoke of
    "no policy module at learner_group/...", which says neither what happened nor what to pass."""
    ckpt = Path(checkpoint).expanduser()
    if (ckpt / MODULE_SUBDIR).is_dir():
        return None
    if not ckpt.exists():
        return (f"{checkpoint}: this folder does not exist; train with opid-train (it saves a checkpoint at the end "
                "and prints where) and pass that checkpoint_XXXXXX folder")
    if not ckpt.is_dir():
        return f"{checkpoint}: is a file; pass a checkpoint_XXXXXX folder written by opid-train"
    inside = sorted(found_checkpoints(ckpt), key=lambda p: p.stat().st_mtime)
    if inside:
        return (f"{checkpoint}: holds no checkpoint itself but {len(inside)} below it; pass one, e.g. the latest: "
                f"{inside[-1]}")
    return (f"{checkpoint}: holds no checkpoint; point at a checkpoint_XXXXXX folder written by opid-train (one is "
            "saved at the end unless --no-checkpoint-at-end) or by Algorithm.save_to_path")


def found_checkpoints(folder: Path, depth: int = 3) -> list[Path]:
    """Checkpoint folders up to `depth` levels under `folder` (a Tune experiment: experiment/trial/checkpoint_*)."""
    found = []
    for level in range(1, depth + 1):
        found += [p for p in folder.glob("/".join(["*"] * level)) if (p / MODULE_SUBDIR).is_dir()]
    return found


def export_checkpoint(checkpoint: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Load the learner's policy module from an OPID checkpoint and save model + tokenizer."""
    problem = checkpoint_problem(checkpoint)
    if problem:
        raise FileNotFoundError(problem)
    from ray.rllib.core.rl_module.rl_module import RLModule

    module_dir = Path(checkpoint).expanduser().resolve() / MODULE_SUBDIR
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
