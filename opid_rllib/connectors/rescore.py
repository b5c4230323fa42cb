"""Re-score the SAME sampled response tokens with the old policy (theta_old, no grad).

This runs before the learner's update, so the learner's current weights are exactly the
weights that sampled the rollout. Three passes, each only over the samples that need it:
  l_old  = log pi_old(y | x)               (all samples, unless recompute_old_logp=False)
  l_ep   = log pi_old(y | x + episode skill) (samples routed to the episode skill)
  l_step = log pi_old(y | x + step skill)    (samples routed to a step skill)
"""

from __future__ import annotations

import time

from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.common import SAMPLES, log, policy_module


class RescoreWithOldPolicy(ConnectorV2):
    def __init__(self, *args, recompute_old_logp: bool = True, **kw):
        super().__init__(*args, **kw)
        self.recompute_old_logp = bool(recompute_old_logp)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = shared_data[SAMPLES]
        module = policy_module(rl_module)
        n = len(t["prompt"])
        t0 = time.perf_counter()
        prompt_ids, _ = module.encode_prompts(t["prompt"])
        t["prompt_ids"] = prompt_ids
        if self.recompute_old_logp:
            t["logp_old"] = module.score(prompt_ids, t["response_ids"])
        else:
            t["logp_old"] = list(t["sampling_logp"])
        t_old = time.perf_counter() - t0
        t0 = time.perf_counter()
        for key in ("ep", "step"):
            idx = [i for i in range(n) if t[f"prompt_{key}"][i] is not None]
            scored = [None] * n
            if idx:
                ids, _ = module.encode_prompts([t[f"prompt_{key}"][i] for i in idx])
                for i, lp in zip(idx, module.score(ids, [t["response_ids"][i] for i in idx])):
                    scored[i] = lp
            t[f"logp_{key}"] = scored
        log(metrics, "timers/old_logp_s", t_old)
        log(metrics, "timers/rescore_s", time.perf_counter() - t0)
        return batch
