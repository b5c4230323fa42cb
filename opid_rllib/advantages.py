"""OPID advantage math: pure numpy, no torch, no Ray.

Notation (OPID paper / reference notes section 5):
    i      flattened step-sample (one env step = one response = one training sample)
    l      response token index
    m      response mask m_{i,l} in {0, 1}
    q      per-sample teacher mask q_i (did sample i get scored with a skill-augmented prompt?)
    R      episode reward (sum of env rewards of the episode)
    S_i    step score = R - coef * (1 - valid_i)
    A_out  outcome (GRPO, episode-relative) advantage, one scalar per step-sample
    Delta  teacher term = stopgrad(logp_teacher - logp_old) * m * q, per token

Final token advantage:
    A_{i,l} = outcome_weight * A_out_i * m_{i,l} + w_ep * Delta^ep_{i,l} + w_step * Delta^step_{i,l}

A stale batch (rollout_staleness > 0, pipeline.py) also gets the truncated importance weight for the lag
(`truncated_importance_weights`, at the end of this file).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Optional, Sequence

import numpy as np

OUTCOME_MODES = ("mean_std", "mean")


def step_scores(
    episode_reward: float, action_valid: np.ndarray, invalid_action_penalty: float
) -> np.ndarray:
    """S_i = R - coef * (1 - valid_i) for every step i of one trajectory.

    The episode reward R is written on every step; the invalid-action penalty is per step,
    so scores can differ between steps of the same trajectory.
    """
    valid = np.asarray(action_valid, dtype=bool)
    invalid = (~valid).astype(np.float64)
    return float(episode_reward) - float(invalid_action_penalty) * invalid


def outcome_advantage(
    scores: np.ndarray,
    group_ids: Sequence[Hashable],
    mode: str,
    eps: float = 1e-6,
) -> np.ndarray:
    """Group-relative (GRPO) outcome advantage, one scalar per step-sample.

    Statistics are taken over ALL step-samples of a group (cross-step), not over trajectories,
    so longer trajectories weigh more in the baseline.
        mean_std: A_i = (S_i - mu_g) / (sigma_g + eps), sigma with ddof=1 (unbiased)
        mean:     A_i = S_i - mu_g
    A group with a single sample uses mu=0, sigma=1.
    """
    if mode not in OUTCOME_MODES:
        raise ValueError(
            f"advantage_mode must be one of {OUTCOME_MODES}, got {mode!r}"
        )
    scores = np.asarray(scores, dtype=np.float64)
    if len(group_ids) != scores.shape[0]:
        raise ValueError(
            f"group_ids has {len(group_ids)} entries but scores has {scores.shape[0]}"
        )

    # Collect sample indices of each group g.
    members: dict = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)

    advantages = np.zeros_like(scores)
    for idx in members.values():
        s_g = scores[idx]
        if len(idx) == 1:
            mu, sigma = 0.0, 1.0
        else:
            mu, sigma = s_g.mean(), s_g.std(ddof=1)
        if mode == "mean_std":
            advantages[idx] = (s_g - mu) / (sigma + eps)
        else:
            advantages[idx] = s_g - mu
    return advantages


def teacher_delta(
    logp_teacher: np.ndarray,
    logp_old: np.ndarray,
    response_mask: np.ndarray,
    sample_mask: np.ndarray,
) -> np.ndarray:
    """Delta_{i,l} = (logp_teacher - logp_old) * m_{i,l} * q_i  (inputs are already stop-grad).

    Uses np.where rather than multiplication so NaN/inf in unselected rows (q_i False) or in
    padding tokens (m = 0) give exact zeros instead of NaN.
    """
    logp_teacher = np.asarray(logp_teacher, dtype=np.float64)
    logp_old = np.asarray(logp_old, dtype=np.float64)
    m = np.asarray(response_mask).astype(bool)
    q = np.asarray(sample_mask).astype(bool)
    if not (logp_teacher.shape == logp_old.shape == m.shape):
        raise ValueError(
            f"shape mismatch: logp_teacher {logp_teacher.shape}, logp_old {logp_old.shape}, "
            f"response_mask {m.shape}"
        )
    if q.shape != (m.shape[0],):
        raise ValueError(f"sample_mask shape {q.shape} != ({m.shape[0]},)")
    active = m & q[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        diff = logp_teacher - logp_old
    return np.where(active, diff, 0.0)


def _normalize_teacher(delta: np.ndarray, active: np.ndarray, eps: float) -> np.ndarray:
    """z-score Delta over the batch's active tokens (m * q on); inactive tokens stay 0.

    Population std (ddof=0); if the std is ~0 the term is only centred.
    """
    if not active.any():
        return delta
    values = delta[active]
    mu, sigma = values.mean(), values.std()
    normed = (delta - mu) / (sigma + eps) if sigma > eps else delta - mu
    return np.where(active, normed, 0.0)


def combine_advantages(
    outcome: np.ndarray,
    response_mask: np.ndarray,
    delta_ep: Optional[np.ndarray],
    delta_step: Optional[np.ndarray],
    w_ep: float,
    w_step: float,
    *,
    normalize_teacher: bool = False,
    clip_teacher: Optional[float] = None,
    outcome_weight: float = 1.0,
    episode_sample_mask: Optional[np.ndarray] = None,
    step_sample_mask: Optional[np.ndarray] = None,
    delta_sample: Optional[np.ndarray] = None,
    w_sample: float = 0.0,
    eps: float = 1e-6,
) -> tuple[np.ndarray, dict]:
    """A_{i,l} = outcome_weight * A_out_i * m + w_ep * Delta^ep + w_step * Delta^step + w_T * Delta^T.

    normalize_teacher: z-score each Delta over its active tokens (m * q) in the batch.
    clip_teacher: symmetric clamp of each Delta to [-c, c], after normalisation, before weighting.
    episode_sample_mask / step_sample_mask: q for each term ([N] bool); only used to pick the
        active tokens for normalisation. If None, q_i is inferred as "row i has any non-zero Delta".
    outcome_weight=0 gives the pure OPSD-style (teacher-only) signal.
    delta_sample / w_sample: Delta^T on rows whose response the skill teacher sampled (0 elsewhere;
        experimental/teacher_samples.py). Clipped like the others, never normalised: its sign is the
        signal (the teacher's own samples are mostly more likely under the teacher, Delta^T > 0).

    Returns (adv [N, L], stats) with stats over response tokens of the WEIGHTED components:
        {outcome,episode_teacher,step_teacher,sample_teacher}_{mean,abs_mean,share}, teacher_active_token_ratio.
    """
    m = np.asarray(response_mask).astype(bool)
    n, length = m.shape
    a_out = np.asarray(outcome, dtype=np.float64)
    if a_out.shape != (n,):
        raise ValueError(f"outcome shape {a_out.shape} != ({n},)")

    # Outcome term: broadcast the per-sample scalar to its response tokens.
    outcome_term = np.where(m, outcome_weight * a_out[:, None], 0.0)

    def teacher_term(delta, q, w, normalize=normalize_teacher):
        if delta is None or w == 0:
            return np.zeros((n, length))
        delta = np.asarray(delta, dtype=np.float64)
        if delta.shape != (n, length):
            raise ValueError(f"teacher delta shape {delta.shape} != {(n, length)}")
        delta = np.where(m, delta, 0.0)
        if normalize:
            if q is None:
                q = (delta != 0).any(axis=1)
            active = m & np.asarray(q).astype(bool)[:, None]
            delta = _normalize_teacher(delta, active, eps)
        if clip_teacher is not None:
            delta = np.clip(delta, -clip_teacher, clip_teacher)
        return w * delta

    ep_term = teacher_term(delta_ep, episode_sample_mask, w_ep)
    step_term = teacher_term(delta_step, step_sample_mask, w_step)
    sample_term = teacher_term(delta_sample, None, w_sample, normalize=False)
    adv = outcome_term + ep_term + step_term + sample_term

    # Stats over response tokens.
    stats: dict = {}
    components = {"outcome": outcome_term, "episode_teacher": ep_term, "step_teacher": step_term,
                  "sample_teacher": sample_term}
    num_tokens = int(m.sum())
    abs_means = {}
    for name, comp in components.items():
        values = comp[m]
        stats[f"{name}_mean"] = float(values.mean()) if num_tokens else 0.0
        abs_means[name] = float(np.abs(values).mean()) if num_tokens else 0.0
        stats[f"{name}_abs_mean"] = abs_means[name]
    total = sum(abs_means.values())
    for name in components:
        stats[f"{name}_share"] = abs_means[name] / total if total > 0 else 0.0
    teacher_on = m & ((ep_term != 0) | (step_term != 0) | (sample_term != 0))
    stats["teacher_active_token_ratio"] = (
        float(teacher_on.sum()) / num_tokens if num_tokens else 0.0
    )
    return adv, stats


def plan_match(action: str, expert_actions) -> float:
    """1.0 / 0.0: does the sampled action equal the expert's next action (case and spaces ignored);
    NaN where the env gives no expert plan."""
    if not expert_actions:
        return float("nan")
    norm = lambda a: " ".join(str(a).lower().split())  # noqa: E731
    return float(norm(action) == norm(expert_actions[0]))


def delta_by_plan(delta: np.ndarray, response_mask: np.ndarray, sample_mask: np.ndarray,
                  on_plan: np.ndarray) -> dict:
    """Does the skill teacher push the right way? Delta split by whether the step followed the plan.

    delta [N, L] (one skill kind), response_mask m [N, L], sample_mask q [N] (rows routed to this
    skill), on_plan [N] (1 = sampled action == expert's next action, 0 = left the plan, NaN = no
    expert). Returns, over routed rows that have a plan:
        on_plan_token_mean / off_plan_token_mean: mean Delta per response token;
        off_plan_neg_frac: share of off-plan rows whose summed Delta (= log teacher/old of the
            whole response) is < 0, i.e. the teacher makes the off-plan response less likely;
        on_plan_steps / off_plan_steps: row counts.
    Means are NaN where no row qualifies (so a plot shows a gap, not a fake 0).
    """
    d = np.asarray(delta, np.float64)
    m = np.asarray(response_mask).astype(bool)
    q = np.asarray(sample_mask).astype(bool)
    plan = np.asarray(on_plan, np.float64)
    out = {}
    for name, rows in (("on_plan", q & (plan == 1)), ("off_plan", q & (plan == 0))):
        tok = d[rows][m[rows]]
        out[f"{name}_token_mean"] = float(tok.mean()) if tok.size else float("nan")
        out[f"{name}_steps"] = int(rows.sum())
    off = q & (plan == 0)
    seq = (np.where(m, d, 0.0)).sum(1)[off]
    out["off_plan_neg_frac"] = float((seq < 0).mean()) if seq.size else float("nan")
    return out


# ---- the off-policy correction of a stale batch ----------------------------------------------------------
# A pipelined batch was sampled by pi_behav (the weights a runner held), while the learner holds newer weights,
# pi_prox, when it updates on it. Two PPO forms, chosen by recompute_old_logp:
#
#   behaviour (default):  L = - min(r A, clip(r, 1 - eps_low, 1 + eps_high) A),  r = pi_theta / pi_behav   (APPO's)
#   recompute (True):     L = - w * min(r A, clip(r) A),  r = pi_theta / pi_prox,
#                         w = min(pi_prox / pi_behav, C)   (truncated importance weight; C = importance_sampling_cap;
#                         verl's and TRL's asynchronous modes, the decoupled PPO objective of AReaL)
#
# Why behaviour is the default: measured, not assumed. On rung 0 (lr 2e-4, one optimizer step an iteration) OPID with
# the recompute form collapsed to 0 % on seed 0 (the episode skill's Delta ran from -0.58 to -1.4 per token and the
# format broke), where the behaviour form reached the target in 16 iterations (serial: 20; docs/LEARNING_GATE.md).
# The behaviour form's clip drops the gradient of a token whose probability already moved past 1 +- eps during the lag;
# the recompute form instead weighs it by up to C, and at this step size that extra push ran away. Either way OPID's
# Delta is scored with the learner's current weights on both sides (connectors/rescore.py).
def truncated_importance_weights(prox_logp: np.ndarray, behav_logp: np.ndarray, mask: np.ndarray,
                                 cap: float) -> tuple[np.ndarray, int]:
    """(w, truncated): w = min(exp(log pi_prox - log pi_behav), cap) on the mask's tokens and 1 elsewhere, as float32
    [B, L]; `truncated` counts the masked tokens whose weight the cap cut. A non-finite log-prob gives weight 0 (the
    token leaves the loss) rather than NaN."""
    prox, behav = np.asarray(prox_logp, np.float64), np.asarray(behav_logp, np.float64)
    m = np.asarray(mask) > 0
    if not (prox.shape == behav.shape == m.shape):
        raise ValueError(f"shape mismatch: prox {prox.shape}, behav {behav.shape}, mask {m.shape}")
    if not cap > 0:
        raise ValueError(f"importance_sampling_cap={cap}: must be > 0")
    with np.errstate(over="ignore", invalid="ignore"):
        raw = np.exp(np.where(m, prox - behav, 0.0))
    raw = np.where(np.isfinite(raw) | (raw == np.inf), raw, 0.0)  # NaN (a non-finite log-prob) -> 0
    w = np.where(m, np.minimum(raw, cap), 1.0)
    return w.astype(np.float32), int((m & (raw > cap)).sum())
