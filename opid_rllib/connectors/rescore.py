"""Re-score the SAME sampled response tokens with the old policy (theta_old, no grad).

This runs before the learner's update, so the learner's current weights are exactly the
weights that sampled the rollout. Three passes, each only over the rows that need it:
  l_old  = log pi_old(y | x)               (all rows, unless recompute_old_logp=False)
  l_ep   = log pi_old(y | x + episode skill) (rows routed to the episode skill)
  l_step = log pi_old(y | x + step skill)    (rows routed to a step skill)
When l_old is recomputed, its distance from the log-probs the sampler reported on the same tokens is logged
(opid/sampler/logp_gap_mean|max): the training-inference mismatch of a sampler that is not the learner's own
forward (vLLM's kernels, another dtype), which verl tracks too; near 1e-5 on float32 vLLM, larger on bf16.
A skill prompt cut by max_prompt_len (left truncation drops the task line, not only the skill) would
measure more than the skill: that row gets no teacher log-prob (it falls back to the plain GRPO signal)
and is counted in opid/teacher_prompt_truncations.
"""

from __future__ import annotations

import time

from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.common import log, policy_module
from opid_rllib.connectors.samples import SAMPLES, StepSamples
from opid_rllib.token_logprobs import logp_gap


class RescoreWithOldPolicy(ConnectorV2):
    def __init__(self, *args, recompute_old_logp: bool = True, **kw):
        super().__init__(*args, **kw)
        self.recompute_old_logp = bool(recompute_old_logp)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        module = policy_module(rl_module)
        t0 = time.perf_counter()
        t.prompt_ids, _ = module.encode_prompts(t.prompt)
        t.logp_old = module.score(t.prompt_ids, t.response_ids) if self.recompute_old_logp else list(t.sampling_logp)
        t_old = time.perf_counter() - t0
        if self.recompute_old_logp and len(t.sampling_logp) == len(t.logp_old):
            for key, value in logp_gap(t.sampling_logp, t.logp_old).items():
                log(metrics, f"sampler/{key}", value)
        t0 = time.perf_counter()
        t.logp_ep, cut_ep = self._score_rows(module, t, t.prompt_ep)
        t.logp_step, cut_step = self._score_rows(module, t, t.prompt_step)
        for i in cut_ep:  # q^ep = 0 for that row: no teacher term, no teacher statistics
            t.episode_skill[i] = t.prompt_ep[i] = None
        for i in cut_step:
            t.step_skill[i] = t.prompt_step[i] = None
        log(metrics, "teacher_prompt_truncations", len(cut_ep) + len(cut_step))
        log(metrics, "timers/old_logp_s", t_old)
        log(metrics, "timers/rescore_s", time.perf_counter() - t0)
        return batch

    @staticmethod
    def _score_rows(module, t: StepSamples, prompts) -> tuple[list, list[int]]:
        """(log-probs per row, None where no skill prompt or it was cut; the rows that were cut)."""
        out = [None] * len(prompts)
        rows = [i for i, p in enumerate(prompts) if p is not None]
        if not rows:
            return out, []
        ids, cut = module.encode_prompts([prompts[i] for i in rows])
        cut_rows = [i for i, c in zip(rows, cut) if c]
        keep = [(i, x) for i, x, c in zip(rows, ids, cut) if not c]
        if keep:
            for (i, _), lp in zip(keep, module.score([x for _, x in keep], [t.response_ids[i] for i, _ in keep])):
                out[i] = lp
        return out, cut_rows

