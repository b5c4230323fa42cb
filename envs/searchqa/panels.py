"""Fixed search-QA panels over the synthetic world's test split.

searchqa/test@v1:  the first 100 single-hop and first 100 multi-hop test questions (200).
searchqa/smoke@v1: the first 5 of each kind (10), for quick end-to-end checks.
Hashes are pinned in tests/envs/test_searchqa_data.py.
"""

from __future__ import annotations

from envs.panels import Panel, register_panel

from .corpus import build_world


def _pick(per_kind: int) -> tuple[str, ...]:
    test = build_world().questions["test"]
    keep = {kind: [q.task_id for q in test if q.task_type == kind][:per_kind] for kind in ("single_hop", "multi_hop")}
    chosen = set(keep["single_hop"]) | set(keep["multi_hop"])
    return tuple(q.task_id for q in test if q.task_id in chosen)  # test-split order, kinds interleaved


def _panel(name: str, per_kind: int):
    return lambda: Panel(name=name, env="searchqa", split="test", task_ids=_pick(per_kind))


register_panel("searchqa/test@v1", _panel("searchqa/test@v1", 100))
register_panel("searchqa/smoke@v1", _panel("searchqa/smoke@v1", 5))
