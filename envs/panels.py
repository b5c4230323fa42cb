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


def task_type_of(task_id: str) -> str:
    """A task id's type as its id spells it: ALFWorld's 'look_at_obj_in_light-Book-.../trial_s1' -> its task type;
    WebShop's and search-QA's ids ('webshop-test-0001') give one type for the whole panel."""
    return str(task_id).split("-", 1)[0]


def spread_over_types(task_ids, k: int | None) -> list[str]:
    """`k` of `task_ids`, taken in turn from each task type (types in the order they first appear, each type's ids
    in panel order); all of them when k is None or covers the list.

    Why: a panel lists its games by type, so its first 4 were all ALFWorld 'Look' games and the per-type table of
    `opid-eval --episodes 4` was mostly empty."""
    ids = list(task_ids)
    if k is None or int(k) >= len(ids):
        return ids
    by_type: dict[str, list[str]] = {}
    for t in ids:
        by_type.setdefault(task_type_of(t), []).append(t)
    queues, picked = [list(v) for v in by_type.values()], []
    while len(picked) < int(k):
        for q in queues:
            if q and len(picked) < int(k):
                picked.append(q.pop(0))
    return picked


def spread_note(picked, panel_size: int) -> str:
    """'playing 4 of the panel's 126 games, in turn from each task type: look_at_obj_in_light 1, ...'."""
    kinds: dict[str, int] = {}
    for t in picked:
        kinds[task_type_of(t)] = kinds.get(task_type_of(t), 0) + 1
    which = (f"in turn from each task type: {', '.join(f'{k} {n}' for k, n in kinds.items())}" if len(kinds) > 1
             else "the first ones")
    return f"playing {len(picked)} of the panel's {panel_size} games, {which}"

