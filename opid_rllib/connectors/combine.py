"""A = A_out + w_ep * Delta_ep + w_step * Delta_step (+ w_T * Delta_T on teacher-sampled rows), then the
padded tensor batch for the loss.

Delta = stopgrad(log pi_old(y | x + skill) - log pi_old(y | x)) per response token, zero on rows
not routed to that skill (advantages.teacher_delta); the weights and the optional normalisation /
clip are in advantages.combine_advantages. The output tensors are created on the learner's device.
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID

from opid_rllib.advantages import combine_advantages, delta_by_plan, teacher_delta
from opid_rllib.connectors.common import log, policy_module
from opid_rllib.connectors.samples import SAMPLES, StepSamples
from opid_rllib.token_logprobs import pack


def _pad_rows(rows, width: int, fill: float) -> np.ndarray:
    out = np.full((len(rows), width), fill, np.float32)
    for i, r in enumerate(rows):
        if r is not None and len(r):
            out[i, : len(r)] = r
    return out


class CombineAdvantages(ConnectorV2):
    def __init__(self, *args, w_ep: float = 0.001, w_step: float = 0.001, outcome_weight: float = 1.0,
                 normalize_teacher: bool = False, clip_teacher: float | None = None, w_sample: float = 0.0,
                 device=None, **kw):
        super().__init__(*args, **kw)
        self.w_ep, self.w_step, self.outcome_weight = float(w_ep), float(w_step), float(outcome_weight)
        self.w_sample = float(w_sample)
        self.normalize_teacher, self.clip_teacher = bool(normalize_teacher), clip_teacher
        self.device = torch.device(device) if device is not None else None

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        arrays = pack(t.prompt_ids, t.response_ids, policy_module(rl_module).pad_id)
        width = arrays["response_ids"].shape[1]
        mask = (np.arange(width)[None, :] < arrays["response_len"][:, None]).astype(np.float32)
        logp_old = _pad_rows(t.logp_old, width, 0.0)
        # A non-finite log-prob on a response token (a re-score that overflowed) would turn the row's ratio, and
        # with a z-scored teacher term every advantage of the batch, into NaN: drop what it touches, count it.
        finite = lambda v: np.isfinite(np.where(mask > 0, v, 0.0)).all(1)  # noqa: E731
        old_ok = finite(logp_old)
        mask = mask * old_ok[:, None]  # no old log-prob, no PPO ratio: the row leaves the loss
        logp_old = np.where(mask > 0, logp_old, 0.0)
        log(metrics, "nonfinite/old_logp_rows", int((~old_ok).sum()))
        logp = {k: _pad_rows(getattr(t, f"logp_{k}"), width, np.nan) for k in ("ep", "step")}
        q = {}
        for k, use in (("ep", t.use_episode), ("step", t.use_step)):
            use = np.asarray(use, bool) & old_ok
            bad = use & ~finite(logp[k])
            q[k] = use & ~bad  # the row falls back to the plain GRPO signal
            log(metrics, f"nonfinite/teacher_rows_{k}", int(bad.sum()))
        # Rows without a teacher prompt hold NaN: teacher_delta must turn them into exact zeros.
        deltas = {k: teacher_delta(logp[k], logp_old, mask, q[k]) for k in ("ep", "step")}
        # Delta_T on teacher-sampled rows, 0 on the student's own rows (TeacherSamples).
        delta_sample = _pad_rows(t.sample_delta, width, 0.0)  # combine_advantages masks padding
        sample_ok = finite(delta_sample)
        delta_sample[~sample_ok] = 0.0
        log(metrics, "nonfinite/sample_delta_rows", int((~sample_ok).sum()))
        # The teacher anchor's rows (x + skill, y_T) carry no advantage, and the statistics leave them out.
        anchor = t.anchor
        adv, stats = combine_advantages(
            t.outcome_adv, mask * (1.0 - anchor[:, None]), deltas["ep"], deltas["step"], self.w_ep, self.w_step,
            normalize_teacher=self.normalize_teacher, clip_teacher=self.clip_teacher,
            outcome_weight=self.outcome_weight, episode_sample_mask=q["ep"], step_sample_mask=q["step"],
            delta_sample=delta_sample, w_sample=self.w_sample)
        for k, v in stats.items():
            log(metrics, f"adv/{k}", v)
        for key in ("ep", "step"):
            self._log_delta(metrics, key, deltas[key], mask, q[key], t.on_plan)
        as_t = lambda v: torch.as_tensor(v, device=self.device)  # noqa: E731
        out = {k: as_t(v) for k, v in arrays.items()}
        out["old_logp"] = as_t(logp_old)
        out["advantages"] = as_t(adv.astype(np.float32))
        out["response_mask"] = as_t(mask)
        # Unweighted Delta for the optional GRPO+OPSD distillation loss term (losses.py).
        out["teacher_delta"] = as_t((deltas["ep"] + deltas["step"]).astype(np.float32))
        # Rows the skill teacher sampled (TeacherSamples), for the optional teacher-sample likelihood term.
        out["teacher_rows"] = as_t(np.array([d is not None for d in t.sample_delta], np.float32))
        if anchor.any():  # rows trained only toward pi_ref on the skill prompt (losses.py)
            out["anchor_rows"] = as_t(anchor.astype(np.float32))
        batch[DEFAULT_MODULE_ID] = out
        return batch

    @staticmethod
    def _log_delta(metrics, key, d, mask, q, on_plan) -> None:
        """Does the policy react to the skill at all, and in the right direction?"""
        if metrics is None or not q.any():
            return
        tok = d[q][mask[q] > 0]
        log(metrics, f"delta_{key}/token_mean", float(tok.mean()) if tok.size else 0.0)
        log(metrics, f"delta_{key}/token_abs_mean", float(np.abs(tok).mean()) if tok.size else 0.0)
        log(metrics, f"delta_{key}/token_std", float(tok.std()) if tok.size else 0.0)
        log(metrics, f"delta_{key}/token_pos_frac", float((tok > 0).mean()) if tok.size else 0.0)
        log(metrics, f"delta_{key}/seq_sum_mean", float((d * mask).sum(1)[q].mean()))
        if np.isfinite(on_plan[q]).any():  # only where the env gives an expert plan
            for k, v in delta_by_plan(d, mask, q, on_plan).items():
                if np.isfinite(v):
                    log(metrics, f"delta_{key}/{k}", v)
