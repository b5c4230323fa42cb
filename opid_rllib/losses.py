"""The paper's token-level policy loss, readable top to bottom (CleanRL style): clipped PPO with dual clip, KL to
the reference, entropy bonus. Research terms (opid_rllib/experimental/) add their own sums beside it.

Symbols: pi_theta current policy, pi_old the policy that sampled (theta_old), pi_ref the frozen initial policy,
A_{i,l} the per-token advantage (outcome + weighted skill terms, connectors/combine.py), m_{i,l} the response
mask. Every term is summed over tokens here; the learner divides by the number of response tokens of the whole
(mini)batch, i.e. token-mean aggregation as in verl. Parameters carry OPIDConfig's names.
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
    clip_ratio_low: float = 0.2,           # eps_low
    clip_ratio_high: float = 0.2,          # eps_high
    dual_clip_c: float | None = 3.0,       # c
    kl_coeff: float = 0.01,                # beta_KL
    entropy_coeff: float = 0.001,          # beta_H
    is_weight: torch.Tensor | None = None,  # w_{i,l} = min(pi_old / pi_behav, C)  [B, L] (a stale batch only)
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Returns (sum over tokens of the loss, sums of diagnostics over tokens; kl_ref_tokens counts kl_ref's)."""
    # r = pi_theta / pi_old, per token.
    log_ratio = torch.where(mask > 0, logp - old_logp, 0.0)  # padding: ratio 1, whatever its log-probs hold
    ratio = torch.exp(log_ratio)
    # Clipped surrogate: max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)).
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    pg = torch.maximum(pg1, pg2)
    clipped = (pg2 > pg1).float()
    if dual_clip_c is not None:
        # Dual clip (Ye et al. 2020): for A < 0 bound the loss by -A * c.
        pg = torch.where(adv < 0, torch.minimum(pg, -adv * dual_clip_c), pg)
    if is_weight is not None:
        # A stale batch (pipeline.py): pi_old is the learner's weights at update time; w corrects for the policy
        # that actually sampled, truncated at C (decoupled PPO; advantages.truncated_importance_weights).
        pg = is_weight.detach() * pg
    loss = pg
    stats = {"policy_loss": (pg * mask).sum(), "clip_frac": (clipped * mask).sum(),
             "approx_kl_old": (0.5 * log_ratio.pow(2) * mask).sum()}
    if entropy is not None:
        # Entropy bonus: - beta_H * H.
        loss = loss - entropy_coeff * entropy if entropy_coeff else loss
        stats["entropy"] = (entropy.detach() * mask).sum()
    if ref_logp is not None and kl_coeff:
        # KL penalty: + beta_KL * KL(pi_theta || pi_ref), the k3 estimate per token.
        kl = k3_kl(ref_logp, logp)
        loss = loss + kl_coeff * kl
        stats["kl_ref"], stats["kl_ref_tokens"] = (kl.detach() * mask).sum(), mask.sum()
    # where, not "* mask": a non-finite value on a padding token must not turn the sum into NaN.
    return torch.where(mask > 0, loss, 0.0).sum(), {k: v.detach() for k, v in stats.items()}


def k3_kl(ref_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """Low-variance KL(pi_theta || pi_ref) estimator (k3) on tokens sampled from pi_theta: exp(ref - logp) -
    (ref - logp) - 1, clamped as in verl."""
    d = ref_logp - logp
    return torch.clamp(torch.exp(d) - d - 1.0, min=-10.0, max=10.0)
