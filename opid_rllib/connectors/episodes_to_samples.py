"""Episodes -> one sample per env step (prompt, sampled response, outcome advantage, skills)."""

from __future__ import annotations

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.common import SAMPLES


class EpisodesToStepSamples(ConnectorV2):
    """Flattens whole episodes into the step-sample table the later pieces extend.

    The outcome advantage was computed on the driver per GRPO group (before sharding) and
    travels in `episode.custom_data["opid"]["outcome_adv"]`.
    """

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = {k: [] for k in ("prompt", "response_ids", "sampling_logp", "outcome_adv", "format_valid",
                             "traj_id", "task_type", "step_index", "skills")}
        for ep in episodes:
            meta = ep.custom_data["opid"]
            adv = meta.get("outcome_adv")
            if adv is None or len(adv) != len(ep):
                raise ValueError(f"episode {meta.get('traj_id')} reached the learner without an outcome "
                                 "advantage per step: OPID.training_step must set it before the update")
            extra = {k: ep.get_extra_model_outputs(k) for k in ("prompt", "response_ids", "response_len",
                                                                "logp", "format_valid")}
            for i in range(len(ep)):
                n = int(extra["response_len"][i])
                t["prompt"].append(str(extra["prompt"][i]))
                t["response_ids"].append([int(x) for x in extra["response_ids"][i][:n]])
                t["sampling_logp"].append(np.asarray(extra["logp"][i][:n], np.float32))
                t["outcome_adv"].append(float(adv[i]))
                t["format_valid"].append(bool(extra["format_valid"][i]))
                t["traj_id"].append(meta["traj_id"])
                t["task_type"].append(meta.get("task_type", ""))
                t["step_index"].append(i)
                t["skills"].append(meta.get("skills"))
        t["outcome_adv"] = np.asarray(t["outcome_adv"], np.float32)
        t["format_valid"] = np.asarray(t["format_valid"], bool)
        t["step_index"] = np.asarray(t["step_index"], np.int64)
        shared_data[SAMPLES] = t
        return batch
