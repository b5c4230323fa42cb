"""Analyzer data model and base class.

Why this seam: the env runner hands every finished trajectory to an analyzer and the learner
connector later attaches the resulting skills to that trajectory's step samples. Both sides only
see `TrajectoryRecord` in and `Skills` out, so the LLM backend and the deterministic hindsight
analyzer are interchangeable, and an analyzer failure can never break a rollout: `analyze` turns
every exception into `Skills(error=...)` (the trajectory then simply gets no teacher signal).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

log = logging.getLogger(__name__)

# Errors end up in metrics and JSON dumps: keep them short.
MAX_ERROR_CHARS = 500


@dataclass
class StepRecord:
    """One env step as the analyzer sees it."""

    index: int                     # 0-based step index within the trajectory
    observation: str               # raw env observation shown before the action
    response: str                  # decoded policy response (incl. <think>)
    action: str                    # projected action sent to the env
    action_valid: bool = True      # response had the required format
    reward: float = 0.0
    ret: float = 0.0               # discounted return G_t (`discounted_returns`; before any invalid-action penalty)
    admissible_actions: list[str] = field(default_factory=list)
    expert_actions: list[str] = field(default_factory=list)  # expert plan from this state

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StepRecord":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class TrajectoryRecord:
    """A finished trajectory: the analyzer's whole input."""

    traj_id: str
    group_id: str
    task_id: str
    task: str
    task_type: str
    env_name: str
    success: bool | None = None    # None = outcome unknown
    episode_reward: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)
    ground_truth: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrajectoryRecord":
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        kw["steps"] = [s if isinstance(s, StepRecord) else StepRecord.from_dict(s) for s in d.get("steps", [])]
        kw["ground_truth"] = dict(d.get("ground_truth") or {})
        return cls(**kw)


@dataclass
class Skills:
    """Analyzer output for one trajectory.

    `step_skills` maps 0-based step index -> one imperative sentence. `attempts` counts model
    calls (HTTP requests for the LLM backend, 1 for hindsight); `latency_s` is wall time.
    """

    episode_summary: str = ""
    episode_skill: str = ""
    step_skills: dict[int, str] = field(default_factory=dict)
    error: str | None = None
    latency_s: float = 0.0
    attempts: int = 0

    @property
    def ok(self) -> bool:
        """Usable for teacher signals: no error and a non-empty episode skill."""
        return self.error is None and bool(self.episode_skill.strip())

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (step keys become strings, as JSON requires)."""
        return {
            "episode_summary": self.episode_summary,
            "episode_skill": self.episode_skill,
            "step_skills": {str(k): v for k, v in sorted(self.step_skills.items())},
            "error": self.error,
            "latency_s": float(self.latency_s),
            "attempts": int(self.attempts),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Skills":
        if isinstance(d, Skills):
            return d
        return cls(
            episode_summary=str(d.get("episode_summary") or ""),
            episode_skill=str(d.get("episode_skill") or ""),
            step_skills={int(k): str(v) for k, v in (d.get("step_skills") or {}).items()},
            error=d.get("error"),
            latency_s=float(d.get("latency_s") or 0.0),
            attempts=int(d.get("attempts") or 0),
        )


def discounted_returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """G_t = r_t + gamma * G_{t+1}, with G_T = 0 after the last step: the "Return:" of each step in the analyzer's
    prompt (gamma: RLlib's config.gamma, 0.95 in the reference). The only use of gamma: GRPO's advantage is
    undiscounted, so nothing in training is discounted."""
    rewards = np.asarray(rewards, dtype=np.float64)
    returns = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def short_error(exc: BaseException | str, limit: int = MAX_ERROR_CHARS) -> str:
    """One-line, bounded error text (HTTP error bodies can be huge)."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Analyzer:
    """Base class. Subclasses implement `_analyze`; callers use `analyze`, which never raises."""

    name = "base"

    def __init__(self, max_step_skills: int = 5):
        if int(max_step_skills) < 0:
            raise ValueError(f"max_step_skills={max_step_skills}: must be >= 0")
        self.max_step_skills = int(max_step_skills)

    def _analyze(self, traj: TrajectoryRecord) -> Skills:
        raise NotImplementedError

    def _redact(self, text: str) -> str:
        """Hook for backends holding secrets; applied to every error message."""
        return text

    def stats(self) -> dict[str, float]:
        """Backend-specific cumulative counters (e.g. timeouts), merged into AnalyzerPool.stats()."""
        return {}

    def analyze(self, traj: TrajectoryRecord) -> Skills:
        t0 = time.monotonic()
        try:
            if not traj.steps:
                skills = Skills(error="trajectory has no steps")
            else:
                skills = self._analyze(traj)
                if not isinstance(skills, Skills):
                    raise TypeError(f"{type(self).__name__}._analyze returned {type(skills).__name__}, not Skills")
        except Exception as exc:  # never raise: a failed analysis only costs teacher signal
            skills = Skills(error=self._redact(f"{type(exc).__name__}: {exc}"))
        if skills.error is not None:  # redact before shortening: a cut must not expose a key prefix
            skills.error = short_error(self._redact(skills.error))
            log.warning("%s analyzer: no skills for trajectory %s: %s", self.name,
                        getattr(traj, "traj_id", "?"), skills.error)
        if not skills.latency_s:
            skills.latency_s = time.monotonic() - t0
        return skills
