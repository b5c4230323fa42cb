"""Fixed evaluation panels: named, versioned task lists with a content hash.

Why: validation sets drawn at random are why other projects' numbers do not reproduce.
A panel name like "alfworld/valid_unseen@v1" always means the same games, everywhere.
Each env package registers its panels with `register_panel` at import time.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from typing import Callable

_PANELS: dict[str, Callable[[], "Panel"]] = {}
_ENV_MODULES = {"alfworld": "envs.alfworld.panels", "webshop": "envs.webshop.panels",
                "searchqa": "envs.searchqa.panels"}


@dataclass(frozen=True)
class Panel:
    name: str            # "alfworld/valid_unseen@v1"
    env: str             # short env name
    split: str           # env split the task ids belong to
    task_ids: tuple[str, ...]
    env_kwargs: dict = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """Hash of the panel's content (not of Python objects), stable across machines."""
        payload = json.dumps({"name": self.name, "env": self.env, "split": self.split,
                              "task_ids": list(self.task_ids)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


def register_panel(name: str, factory: Callable[[], Panel]) -> None:
    _PANELS[name] = factory


def _load_env_panels(env: str) -> None:
    mod = _ENV_MODULES.get(env)
    if mod:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:  # env not installed/implemented yet
            if e.name and not e.name.startswith("envs."):
                raise


def get_panel(name: str) -> Panel:
    env = name.split("/", 1)[0]
    _load_env_panels(env)
    if name not in _PANELS:
        raise KeyError(f"panel={name!r}: unknown; known panels: {list_panels()}")
    return _PANELS[name]()


def list_panels() -> list[str]:
    for env in _ENV_MODULES:
        _load_env_panels(env)
    return sorted(_PANELS)
