"""The one seam between the rollout and whatever generates tokens (HF generate or vLLM).

Why a seam: CPU tests use Hugging Face `generate`; GPU clusters use vLLM. The env runner only
ever calls `generate` and `load_state_dict`, so the rest of OPID is backend-agnostic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

@dataclass
class Generation:
    token_ids: list[int]          # sampled response tokens (no prompt, no padding)
    logprobs: list[float]         # log pi(token | prefix) at the sampling temperature, one per token
    text: str                     # decoded response (special tokens skipped)
    finish_reason: str = "stop"   # "stop" (EOS) or "length" (max_new_tokens reached)
    extra: dict = field(default_factory=dict)


class GenerationBackend:
    """Abstract backend. Implementations: generation/hf.py, generation/vllm.py."""

    name = "base"

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        max_new_tokens: int = 64,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        raise NotImplementedError

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Push new policy weights (called after every learner update)."""
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - optional
        pass
