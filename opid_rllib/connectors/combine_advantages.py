"""A = A_out + w_ep * Delta_ep + w_step * Delta_step, then the tensor batch for the loss."""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID

from opid_rllib.advantages import combine_advantages, teacher_delta
from opid_rllib.connectors.common import SAMPLES, log, policy_module
from opid_rllib.token_logprobs import pack


def _pad_rows(rows, width, n):
    out = np.zeros((n, width), np.float32)
    for i, r in enumerate(rows):
        if r is not None and len(r):
            out[i, : len(r)] = r
    return out


class CombineAdvantages(ConnectorV2):
    def __init__(self, *args, w_ep: float = 0.001, w_step: float = 0.001, outcome_weight: float = 1.0,
                 normalize_teacher: bool = False, clip_teacher: float | None = None, **kw):
        super().__init__(*args, **kw)
        self.w_ep, self.w_step, self.outcome_weight = float(w_ep), float(w_step), float(outcome_weight)
        self.normalize_teacher, self.clip_teacher = bool(normalize_teacher), clip_teacher

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = shared_data[SAMPLES]
        module = policy_module(rl_module)
        n = len(t["prompt"])
        arrays = pack(t["prompt_ids"], t["response_ids"], module.pad_id)
        width = arrays["response_ids"].shape[1]
        mask = (np.arange(width)[None, :] < arrays["response_len"][:, None]).astype(np.float32)
        logp_old = _pad_rows(t["logp_old"], width, n)
        deltas = {}
        for key in ("ep", "step"):
            q = t["use_episode"] if key == "ep" else t["use_step"]
            # Rows without a teacher prompt hold NaN: teacher_delta must turn them into exact zeros.
            teacher = np.full((n, width), np.nan, np.float32)
            for i, lp in enumerate(t[f"logp_{key}"]):
                if lp is not None:
                    teacher[i, : len(lp)] = lp
            deltas[key] = teacher_delta(teacher, logp_old, mask, q)
        adv, stats = combine_advantages(
            t["outcome_adv"], mask, deltas["ep"], deltas["step"], self.w_ep, self.w_step,
            normalize_teacher=self.normalize_teacher, clip_teacher=self.clip_teacher,
            outcome_weight=self.outcome_weight, episode_sample_mask=t["use_episode"],
            step_sample_mask=t["use_step"])
        for k, v in stats.items():
            log(metrics, f"adv/{k}", v)
        for key, q in (("ep", t["use_episode"]), ("step", t["use_step"])):
            if q.any():
                d = deltas[key][q]
                m = mask[q]
                # Does the policy react to the skill at all? Mean, spread and sign of the per-token shift.
                tok = d[m > 0]
                log(metrics, f"delta_{key}/token_mean", float(tok.mean()) if tok.size else 0.0)
                log(metrics, f"delta_{key}/token_abs_mean", float(np.abs(tok).mean()) if tok.size else 0.0)
                log(metrics, f"delta_{key}/token_std", float(tok.std()) if tok.size else 0.0)
                log(metrics, f"delta_{key}/token_pos_frac", float((tok > 0).mean()) if tok.size else 0.0)
                log(metrics, f"delta_{key}/seq_sum_mean", float((d * m).sum(1).mean()))
        out = {k: torch.as_tensor(v) for k, v in arrays.items()}
        out["old_logp"] = torch.as_tensor(logp_old)
        out["advantages"] = torch.as_tensor(adv.astype(np.float32))
        out["response_mask"] = torch.as_tensor(mask)
        # Unweighted Delta for the optional GRPO+OPSD distillation loss term (learner.py).
        out["teacher_delta"] = torch.as_tensor((deltas["ep"] + deltas["step"]).astype(np.float32))
        batch[DEFAULT_MODULE_ID] = out
        return batch
