"""The token-level policy loss, readable top to bottom (CleanRL style).

Symbols: pi_theta current policy, pi_old the policy that sampled (theta_old), pi_ref the frozen
initial policy, A_{i,l} the per-token advantage (outcome + weighted skill terms), m_{i,l} the
response mask. Every term is summed over tokens here; the learner divides by the number of
response tokens of the whole (mini)batch, i.e. token-mean aggregation as in verl.
"""

from __future__ import annotations

import torch


def ppo_token_loss(
    logp: torch.Tensor,         # log pi_theta(y_l | x, y_<l)          [B, L]
    old_logp: torch.Tensor,     # log pi_old(y_l | ...)                [B, L]
    adv: torch.Tensor,          # A_{i,l}                              [B, L]
    mask: torch.Tensor,         # m_{i,l}                              [B, L]
    *,
    entropy: torch.Tensor | None = None,   # H(pi_theta(. | x, y_<l))  [B, L]
    ref_logp: torch.Tensor | None = None,  # log pi_ref(y_l | ...)     [B, L]
    teacher_delta: torch.Tensor | None = None,  # Delta for the OPSD term [B, L]
    teacher_rows: torch.Tensor | None = None,   # 1 on rows the skill teacher sampled (y_T), else 0  [B]
    anchor_rows: torch.Tensor | None = None,    # 1 on rows (x + skill, y_T): the teacher anchor's, else 0 [B]
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip_c: float | None = 3.0,
    kl_coeff: float = 0.01,
    entropy_coeff: float = 0.001,
    opsd_coeff: float = 0.0,
    teacher_sft_coeff: float = 0.0,
    anchor_coeff: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Returns (sum over tokens of the loss, sums of diagnostics over tokens). Anchor rows (teacher_anchor_coeff)
    are left out of every diagnostic but their own (teacher_anchor_kl, teacher_anchor_tokens). kl_ref sums over
    the rows the policy sampled alone (kl_ref_tokens counts them): k3 estimates KL(pi_theta || pi_ref) only on
    pi_theta's own samples, and a teacher row's y_T was drawn from pi_old(. | x + skill)."""
    on = anchor_rows is not None and anchor_coeff and bool(anchor_rows.any())  # a micro-batch may hold none
    anchor = anchor_rows[:, None].to(logp.dtype) if on else None
    diag = mask if anchor is None else mask * (1.0 - anchor)  # the student's tokens
    # r = pi_theta / pi_old, per token.
    log_ratio = torch.where(mask > 0, logp - old_logp, 0.0)  # padding: ratio 1, whatever its log-probs hold
    ratio = torch.exp(log_ratio)
    # Clipped surrogate: max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)).
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(pg1, pg2)
    clipped = (pg2 > pg1).float()
    if dual_clip_c is not None:
        # Dual clip (Ye et al. 2020): for A < 0 bound the loss by -A * c.
        pg3 = -adv * dual_clip_c
        pg = torch.where(adv < 0, torch.minimum(pg, pg3), pg)
    loss = pg
    stats = {"policy_loss": (pg * diag).sum(), "clip_frac": (clipped * diag).sum(),
             "approx_kl_old": (0.5 * log_ratio.pow(2) * diag).sum()}
    if entropy is not None and entropy_coeff:
        # Entropy bonus: - beta_H * H.
        loss = loss - entropy_coeff * entropy
    if entropy is not None:
        stats["entropy"] = (entropy.detach() * diag).sum()
    if ref_logp is not None and kl_coeff:
        kl = _k3(ref_logp, logp)
        loss = loss + kl_coeff * kl
        own = diag if teacher_rows is None else diag * (1.0 - teacher_rows[:, None].to(logp.dtype))
        stats["kl_ref"] = (kl.detach() * own).sum()
        stats["kl_ref_tokens"] = own.sum()
    if teacher_delta is not None and opsd_coeff:
        # GRPO+OPSD: separate distillation term -c * Delta * log pi_theta (pull towards the
        # skill-conditioned teacher on the policy's own samples).
        loss = loss - opsd_coeff * teacher_delta * logp
    if teacher_rows is not None and teacher_sft_coeff:
        # Teacher-sample likelihood: -c_T * log pi_theta(y_T | x) on rows y_T ~ pi_old(. | x + skill). Its
        # gradient is that of KL(pi_teacher || pi_theta) at x; unclipped, so the student can move toward
        # the teacher faster than the PPO clip lets A_T = w_T * Delta_T move it (1 + eps per iteration).
        sft = -logp * teacher_rows[:, None].to(logp.dtype)
        loss = loss + teacher_sft_coeff * sft
        stats["teacher_sft_nll"] = (sft.detach() * mask).sum()
    if anchor is not None:
        # Teacher anchor (pi-Distill's teacher side, anchored): on rows (x + skill, y_T), y_T ~ pi_old(. | x + skill),
        # nothing but c_A * KL(pi_theta(. | x + skill) || pi_ref(. | x + skill)). The teacher is these same weights,
        # and every other term trains only the plain prompt; this keeps the skill-reading the teacher's Delta
        # needs at the base's level. Its tokens are left out of the learner's token count.
        if ref_logp is None:
            raise ValueError("anchor_coeff > 0 needs ref_logp (log pi_ref on the anchor rows)")
        kl_anchor = _k3(ref_logp, logp)
        loss = loss * (1.0 - anchor) + anchor_coeff * kl_anchor * anchor
        stats["teacher_anchor_kl"] = (kl_anchor.detach() * mask * anchor).sum()
        stats["teacher_anchor_tokens"] = (mask * anchor).sum()
    # where, not "* mask": a non-finite value on a padding token must not turn the sum into NaN.
    return torch.where(mask > 0, loss, 0.0).sum(), {k: v.detach() for k, v in stats.items()}


def _k3(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """Low-variance KL(pi_theta || pi_ref) estimator (k3) on tokens sampled from pi_theta: exp(ref - logp) -
    (ref - logp) - 1, clamped as in verl."""
    d = ref_logp - logp
    return torch.clamp(torch.exp(d) - d - 1.0, min=-10.0, max=10.0)
