"""Re-score the SAME sampled response tokens with the old policy (theta_old, no grad).

This runs before the learner's update, so the learner's current weights are exactly the
weights that sampled the rollout. Three passes, each only over the rows that need it:
  l_old  = log pi_old(y | x)               (all rows, when recompute_old_logp; else the sampler's log-probs)
  l_ep   = log pi_old(y | x + episode skill) (rows routed to the episode skill)
  l_step = log pi_old(y | x + step skill)    (rows routed to a step skill)
When l_old is recomputed, its distance from the log-probs the sampler reported on the same tokens is logged
(opid/sampler/logp_gap_mean|max|tokens): the training-inference mismatch of a sampler whose weights or kernels
are not the learner's (vLLM's kernels, bf16 sampler weights against the learner's fp32 masters), which verl
tracks too; near 1e-5 on float32 vLLM, larger on bf16.

A stale batch (rollout_staleness > 0, pipeline.py) was sampled with older weights than the learner holds now: l_old
is always recomputed then, so that Delta = l_skill - l_old compares two scores of the same weights and measures the
skill, not the lag. Its gap to the sampler's log-probs is then the lag's (plus any kernel mismatch). The PPO ratio's
denominator (`ratio_logp`) is the sampler's log-probs (the pipelined default), or l_old with recompute_old_logp=True
(combine.py then adds the truncated importance weight).
"""

from __future__ import annotations

import time

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.samples import SAMPLES, StepSamples, log, policy_module


def logp_gap(sampled, recomputed) -> dict[str, float]:
    """Mean and max |log p_sampler - log p_learner| over the sampled tokens both scored (finite values only),
    and how many tokens that is; {} when there are none."""
    gaps = []
    for a, b in zip(sampled, recomputed):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        n = min(len(a), len(b))
        d = np.abs(a[:n] - b[:n])
        gaps.append(d[np.isfinite(d)])
    d = np.concatenate(gaps) if gaps else np.zeros(0)
    if not d.size:
        return {}
    return {"logp_gap_mean": float(d.mean()), "logp_gap_max": float(d.max()), "logp_gap_tokens": int(d.size)}


class RescoreWithOldPolicy(ConnectorV2):
    def __init__(self, *args, recompute_old_logp: bool, stale: bool = False, **kw):
        super().__init__(*args, **kw)
        self.recompute_old_logp = bool(recompute_old_logp)
        self.stale = bool(stale)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        module = policy_module(rl_module)
        t0 = time.perf_counter()
        recompute = self.recompute_old_logp or self.stale
        t.logp_old = module.score(t.prompt_ids, t.response_ids) if recompute else list(t.sampling_logp)
        # the same list unless a stale batch keeps the sampler's (combine.py then pads it once)
        t.ratio_logp = list(t.sampling_logp) if self.stale and not self.recompute_old_logp else t.logp_old
        t_old = time.perf_counter() - t0
        if recompute:
            for key, value in logp_gap(t.sampling_logp, t.logp_old).items():
                log(metrics, f"sampler/{key}", value)
        t0 = time.perf_counter()
        t.logp_ep = self._score_rows(module, t, t.prompt_ep)
        t.logp_step = self._score_rows(module, t, t.prompt_step)
        log(metrics, "timers/old_logp_s", t_old)
        log(metrics, "timers/rescore_s", time.perf_counter() - t0)
        return batch

    @staticmethod
    def _score_rows(module, t: StepSamples, prompt_ids) -> list:
        """log pi_old(y | that row's prompt) per row, None where the row has none."""
        out = [None] * len(prompt_ids)
        rows = [i for i, p in enumerate(prompt_ids) if p is not None]
        if rows:
            for i, lp in zip(rows, module.score([prompt_ids[i] for i in rows], [t.response_ids[i] for i in rows])):
                out[i] = lp
        return out
