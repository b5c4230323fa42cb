"""A = A_out + w_ep * Delta_ep + w_step * Delta_step, then the padded tensor batch for the loss.

Delta = stopgrad(log pi_old(y | x + skill) - log pi_old(y | x)) per response token, zero on rows
not routed to that skill (advantages.teacher_delta); the weights are in advantages.combine_advantages.
A stale batch (pipeline.py) gets the PPO ratio's denominator (`ratio_logp`) as old_logp, and with
importance_sampling_cap a per-token truncated importance weight for the lag, as `is_weight`
(advantages.truncated_importance_weights).
The output tensors are created on the learner's device. The routes trained (q per row, after the
non-finite check) are reported per trajectory under opid/trained_routes, which the skill dumps read.

Research plug-ins (opid_rllib/experimental/) extend this piece through `combine_options` and `outputs`
(subclasses that the pipeline builds only when they are on).
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID

from opid_rllib.advantages import combine_advantages, delta_by_plan, teacher_delta, truncated_importance_weights
from opid_rllib.connectors.samples import SAMPLES, StepSamples, log, policy_module
from opid_rllib.prompts.skills import route_label

TRAINED_ROUTES = ("opid", "trained_routes")  # learner metric: {traj_id: [route label per step]} (item_series)


def pad_rows(rows, width: int, fill: float) -> np.ndarray:
    out = np.full((len(rows), width), fill, np.float32)
    for i, r in enumerate(rows):
        if r is not None and len(r):
            out[i, : len(r)] = r
    return out


class CombineAdvantages(ConnectorV2):
    def __init__(self, *args, episode_skill_adv_weight: float, step_skill_adv_weight: float,
                 outcome_adv_weight: float = 1.0, device=None, importance_sampling_cap: float | None = None, **kw):
        super().__init__(*args, **kw)
        self.is_cap = None if importance_sampling_cap is None else float(importance_sampling_cap)
        self.w_ep, self.w_step = float(episode_skill_adv_weight), float(step_skill_adv_weight)
        self.outcome_weight = float(outcome_adv_weight)
        self.device = torch.device(device) if device is not None else None

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        arrays = policy_module(rl_module).batch_arrays(t.prompt_ids, t.response_ids)
        width = arrays["response_ids"].shape[1]
        mask = (np.arange(width)[None, :] < arrays["response_len"][:, None]).astype(np.float32)
        logp_old = pad_rows(t.logp_old, width, 0.0)
        # A non-finite log-prob on a response token (a re-score that overflowed) would turn the row's ratio, and
        # with a z-scored teacher term every advantage of the batch, into NaN: drop what it touches, count it.
        finite = lambda v: np.isfinite(np.where(mask > 0, v, 0.0)).all(1)  # noqa: E731
        old_ok = finite(logp_old)
        mask = mask * old_ok[:, None]  # no old log-prob, no PPO ratio: the row leaves the loss
        # The PPO ratio's denominator: log pi_old itself, except for a stale batch that keeps the sampler's.
        ratio_logp = logp_old if t.ratio_logp is t.logp_old or not t.ratio_logp else pad_rows(t.ratio_logp, width, 0.0)
        ratio_ok = finite(ratio_logp)
        mask = mask * ratio_ok[:, None]
        old_ok = old_ok & ratio_ok
        logp_old = np.where(mask > 0, logp_old, 0.0)
        ratio_logp = np.where(mask > 0, ratio_logp, 0.0)
        log(metrics, "nonfinite/old_logp_rows", int((~old_ok).sum()))
        logp = {k: pad_rows(getattr(t, f"logp_{k}"), width, np.nan) for k in ("ep", "step")}
        q = {}
        for k, use in (("ep", t.use_episode), ("step", t.use_step)):
            use = use & old_ok
            bad = use & ~finite(logp[k])
            q[k] = use & ~bad  # the row falls back to the plain GRPO signal
            log(metrics, f"nonfinite/teacher_rows_{k}", int(bad.sum()))
        # Rows without a teacher prompt hold NaN: teacher_delta must turn them into exact zeros.
        deltas = {k: teacher_delta(logp[k], logp_old, mask, q[k]) for k in ("ep", "step")}
        adv, stats = combine_advantages(
            t.outcome_adv, self.advantage_mask(t, mask), deltas["ep"], deltas["step"], self.w_ep, self.w_step,
            outcome_weight=self.outcome_weight, episode_sample_mask=q["ep"], step_sample_mask=q["step"],
            **self.combine_options(t, width, metrics))
        for k, v in stats.items():
            log(metrics, f"adv/{k}", v)
        for key in ("ep", "step"):
            self._log_delta(metrics, key, deltas[key], mask, q[key], t.on_plan)
        self._log_routes(metrics, t, q)
        as_t = lambda v: torch.as_tensor(v, device=self.device)  # noqa: E731
        out = {k: as_t(v) for k, v in arrays.items()}
        out["old_logp"] = as_t(ratio_logp)
        if self.is_cap is not None:  # a stale batch, its ratio against pi_prox: weight the lag (advantages.py)
            w, truncated = truncated_importance_weights(logp_old, pad_rows(t.sampling_logp, width, 0.0), mask,
                                                        self.is_cap)
            out["is_weight"] = as_t(w)
            log(metrics, "offpolicy/is_truncated_share", truncated / max(1.0, float(mask.sum())))
            log(metrics, "offpolicy/is_weight_mean", float(w[mask > 0].mean()) if mask.any() else 1.0)
        out["advantages"] = as_t(adv.astype(np.float32))
        out["response_mask"] = as_t(mask)
        out.update({k: as_t(v) for k, v in self.outputs(t, deltas).items()})
        batch[DEFAULT_MODULE_ID] = out
        return batch

    # ---- the plug-ins' hooks (opid_rllib/experimental/): nothing in the paper's path ----
    def advantage_mask(self, t: StepSamples, mask: np.ndarray) -> np.ndarray:
        """The tokens that carry an advantage (and its statistics)."""
        return mask

    def combine_options(self, t: StepSamples, width: int, metrics) -> dict:
        """More keyword arguments for advantages.combine_advantages."""
        return {}

    def outputs(self, t: StepSamples, deltas: dict) -> dict:
        """More columns of the loss batch (numpy arrays, one row per step-sample)."""
        return {}

    @staticmethod
    def _log_routes(metrics, t: StepSamples, q: dict) -> None:
        """What was trained, per trajectory: the skill dumps write these labels, so they cannot disagree."""
        if metrics is None:
            return
        routes = {tid: [route_label(bool(q["ep"][i]), bool(q["step"][i])) for i in range(len(t))[traj.rows]]
                  for tid, traj in t.trajectories.items()}
        metrics.log_value(TRAINED_ROUTES, routes, reduce="item_series")

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


def pop_trained_routes(learner_results) -> dict[str, list]:
    """{traj_id: route label per step} as the learners trained them (`_log_routes`), taken out of the learners'
    results (OPID.training_step) so that they reach the skill dumps, not result.json."""
    routes: dict[str, list] = {}
    for result in learner_results if isinstance(learner_results, list) else [learner_results]:
        stats = result.get(TRAINED_ROUTES[0], {}).pop(TRAINED_ROUTES[1], None)
        items = stats.peek() if hasattr(stats, "peek") else stats
        for item in items if isinstance(items, list) else []:  # RLlib's empty series peeks as NaN
            routes.update(item)
    return routes
