"""Driver side of a training iteration's episodes: sharding whole GRPO groups over learners, and the rollout metrics.

The outcome (GRPO) advantage is the first learner connector (connectors/outcome.py): its group statistics need
every episode of a group, so each learner gets whole groups (`shard_by_group`).
"""

from __future__ import annotations

import numpy as np


def shard_by_group(episodes, num_shards: int) -> list[list]:
    """Whole GRPO groups per shard, balanced by step count."""
    by_group: dict[str, list] = {}
    for ep in episodes:
        by_group.setdefault(ep.custom_data["opid"]["group_id"], []).append(ep)
    shards: list[list] = [[] for _ in range(num_shards)]
    for gid in sorted(by_group, key=lambda g: (-sum(len(e) for e in by_group[g]), g)):
        min(shards, key=lambda s: sum(len(e) for e in s)).extend(by_group[gid])
    return shards


def log_rollout_metrics(metrics, episodes) -> None:
    """The iteration's rollout results under opid/ (success, length, format-valid rate, env errors, per task type)."""
    metas = [ep.custom_data["opid"] for ep in episodes]
    won = np.asarray([m["won"] for m in metas], float)
    log = lambda k, v: metrics.log_value(("opid", *k.split("/")), float(v), window=1)  # noqa: E731
    log("success_rate", won.mean())
    log("episode_len_mean", np.mean([len(ep) for ep in episodes]))
    fv = np.concatenate([np.asarray(ep.get_extra_model_outputs("format_valid"), float) for ep in episodes])
    log("format_valid_rate", fv.mean())
    log("env_errors", sum(bool(m.get("env_error")) for m in metas))
    for tt in sorted({m["task_type"] for m in metas}):
        log(f"success_by_type/{tt}", np.mean([m["won"] for m in metas if m["task_type"] == tt]))


# Compatibility names: the skill controls are a research plug-in now (opid_rllib/experimental/controls.py).
from opid_rllib.experimental.controls import (CONTENT_FREE_FILLER, content_free_skills,  # noqa: E402,F401
                                              content_free_text, shuffle_skills_across_tasks)
