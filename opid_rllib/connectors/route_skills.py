"""Critical-first routing (or additive / episode_only / step_only) for every step sample."""

from __future__ import annotations

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.common import SAMPLES, log
from opid_rllib.routing import route


class RouteSkills(ConnectorV2):
    def __init__(self, *args, mode: str = "critical_first", w_ep: float = 0.001, w_step: float = 0.001, **kw):
        super().__init__(*args, **kw)
        self.mode, self.w_ep, self.w_step = mode, float(w_ep), float(w_step)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = shared_data[SAMPLES]
        routes = [route(st, has_episode_skill=ep is not None, mode=self.mode, w_ep=self.w_ep, w_step=self.w_step)
                  for ep, st in zip(t["episode_skill"], t["step_skill"])]
        t["use_episode"] = np.asarray([r.use_episode for r in routes], bool)
        t["use_step"] = np.asarray([r.use_step for r in routes], bool)
        n = max(len(routes), 1)
        log(metrics, "routed_episode_ratio", t["use_episode"].sum() / n)
        log(metrics, "routed_step_ratio", t["use_step"].sum() / n)
        return batch
