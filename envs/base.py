"""The text-environment contract every opid env follows (ALFWorld, WebShop, search QA).

Why a contract: the agent layer (prompts, projection, grouped runner, hindsight analyzer)
must treat all three domains the same way. One episode = one task; the same `task_id`
always yields the same game, so that G copies of a task form a GRPO group.

reset(seed=..., options={"task_id": ...}) -> (obs: str, info)
step(action: str) -> (obs: str, reward: float, terminated: bool, truncated: bool, info)

`info` keys (always present):
  task_id            stable id of the task (str)
  task               the goal sentence shown to the agent
  task_type          category used for per-type success tables
  admissible_actions list[str] of commands valid in the current state
  won                bool, the episode's goal is reached
  step               number of actions taken so far
  action_valid       bool, was the last command understood by the env (True after reset)
optional:
  expert_actions     list[str]: the expert's plan from the current state, first = next action
  score              float in [0, 1] where the env grades partially (WebShop)
  ground_truth       dict of env facts for the hindsight analyzer (target product, gold answer, ...)
"""

from __future__ import annotations

import string
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# RLlib's default Text charset (letters and digits) rejects spaces and punctuation.
TEXT_CHARSET = string.printable
MAX_TEXT_LEN = 200_000

REQUIRED_INFO_KEYS = ("task_id", "task", "task_type", "admissible_actions", "won", "step", "action_valid")


def text_space() -> spaces.Text:
    return spaces.Text(max_length=MAX_TEXT_LEN, min_length=0, charset=TEXT_CHARSET)


def setting(name: str, value: Any, kind: type) -> Any:
    """`kind(value)`, or an error naming the env setting (JSON from --env-kwargs may hold strings)."""
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"env setting {name}={value!r}: must be {'an integer' if kind is int else 'a number'}") \
            from None


def known_settings(cls: type) -> list[str]:
    """The keyword settings an env class takes, over its class chain."""
    import inspect

    names = {p.name for c in cls.__mro__ if "__init__" in vars(c) and issubclass(c, TextEnv)
             for p in inspect.signature(vars(c)["__init__"]).parameters.values()
             if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"}
    return sorted(names)


class TextEnv(gym.Env):
    """Base class: step counting, the max-step cap and info bookkeeping.

    Subclasses implement `task_ids()`, `_reset_task(task_id)` and `_step_task(action)`.
    """

    metadata = {"render_modes": []}
    env_name: str = "text"
    default_max_steps: int = 30

    def __init__(self, split: str = "train", max_steps: int | None = None, **kwargs: Any):
        if kwargs:  # a misspelt env_config key would otherwise be dropped without a word
            raise ValueError(f"{self.env_name} env: unknown setting(s) {sorted(kwargs)} (env_config / --env-kwargs); "
                             f"known: {known_settings(type(self))}")
        self.split = split
        self.max_steps = setting("max_steps", max_steps if max_steps is not None else self.default_max_steps, int)
        if self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps}: must be >= 1")
        self.observation_space = text_space()
        self.action_space = text_space()
        self._step_count = 0
        self._task_id: str | None = None
        self._last_info: dict[str, Any] = {}

    # ---- subclass API -------------------------------------------------------------------
    def task_ids(self) -> Sequence[str]:
        """All task ids of this env's split, in a stable order."""
        raise NotImplementedError

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _step_task(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        """Returns (obs, reward, terminated, info). Must not raise on garbage actions."""
        raise NotImplementedError

    # ---- gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        task_id = options.get("task_id")
        if task_id is None:
            ids = self.task_ids()
            if not ids:
                raise RuntimeError(f"{type(self).__name__}(split={self.split!r}) has no tasks")
            task_id = ids[int(self.np_random.integers(len(ids)))]
        self._task_id = str(task_id)
        self._step_count = 0
        obs, info = self._reset_task(self._task_id)
        info = self._finish_info(info, action_valid=True)
        return obs, info

    def step(self, action: str):
        if self._task_id is None:
            raise RuntimeError("call reset() before step()")
        self._step_count += 1
        obs, reward, terminated, info = self._step_task(str(action))
        truncated = (not terminated) and self._step_count >= self.max_steps
        info = self._finish_info(info, action_valid=info.get("action_valid", True))
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _finish_info(self, info: dict[str, Any], action_valid: bool) -> dict[str, Any]:
        info = dict(info)
        info.setdefault("task_id", self._task_id)
        info["step"] = self._step_count
        info["action_valid"] = bool(action_valid)
        info.setdefault("won", False)
        missing = [k for k in REQUIRED_INFO_KEYS if k not in info]
        if missing:
            raise KeyError(f"{type(self).__name__} info lacks {missing}")
        self._last_info = info
        return info


def seeded_choice(seq: Sequence[Any], seed: int) -> Any:
    """Deterministic pick that does not depend on Python's hash seed."""
    return seq[int(np.random.default_rng(seed).integers(len(seq)))]
