"""GRPO+OPSD's distillation loss (preset grpo_opsd; `opsd_loss_coeff` c > 0), and the OPSD control that keeps the
skill term out of the advantage (`skill_adv_in_advantage=False`): not in the paper's update.

    L_OPSD = -c * Delta * log pi_theta(y | x)   per response token, Delta = the unweighted skill term

pulls the policy toward the skill-conditioned teacher on its own samples, beside the clipped PPO loss.
"""

from __future__ import annotations

import numpy as np
import torch


class OPSDCombine:
    """CombineAdvantages' part: Delta leaves the advantage when asked, and goes to the loss as `teacher_delta`."""

    def __init__(self, *args, skill_adv_in_advantage: bool = True, **kw):
        super().__init__(*args, **kw)
        if not skill_adv_in_advantage:  # Delta is still scored (routing keeps the real weights); it feeds the loss
            self.w_ep = self.w_step = 0.0

    def outputs(self, t, deltas):
        return {**super().outputs(t, deltas), "teacher_delta": (deltas["ep"] + deltas["step"]).astype(np.float32)}


def loss_terms(cfg, logp, mask, batch, ref_logp, stats) -> torch.Tensor:
    """-c * Delta * log pi_theta on the student's tokens, summed."""
    if not cfg.opsd_loss_coeff:
        return torch.zeros((), device=logp.device, dtype=logp.dtype)
    return torch.where(mask > 0, -cfg.opsd_loss_coeff * batch["teacher_delta"] * logp, 0.0).sum()
