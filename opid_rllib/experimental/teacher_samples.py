"""Teacher samples (opt-in, `teacher_sample_adv_weight` > 0): let the student see what the skill teacher would do.

OPID's skill term re-scores the student's OWN response y, so the teacher can only say "more" or "less of
what you did". Where the student never samples the command a step skill names, that knowledge never
reaches it (measured: on a base whose teacher plays 48 points better, the step term only lowered wrong
commands). This piece adds, for each skill-routed row, one response drawn from the teacher itself,

    y_T ~ pi_old(. | x + skill),

as an extra row with the plain prompt x, outcome advantage 0 and the per-token advantage

    A_T = w_T * Delta_T,   Delta_T = stopgrad(log pi_old(y_T | x + skill) - log pi_old(y_T | x)),

i.e. OPID's own Delta, evaluated on the teacher's sample instead of the student's. It is large where the
teacher is sure of a command the student finds unlikely and ~0 where the student already agrees, so the
clipped PPO loss moves the student toward the teacher's choices by at most the clip range per update.
This is the joint, teacher-sampled term of privileged-information distillation (pi-Distill, arXiv
2602.04942), an addition to the paper's update, off by default. Rows: "step" (rows routed to a step skill,
so step_skill_adv_weight > 0; the default: on our tiny base the episode skill was measured as an
anti-teacher) or "routed" (every row with a routed skill). Generation uses Hugging Face `generate` on the
learner's own weights (theta_old, before the update) whatever the rollout backend, so a vLLM rollout engine is
never started on a learner.

Teacher anchor (`teacher_anchor_coeff` c_A > 0): each teacher sample also enters as the row (x + skill, y_T),
with log pi_old(y_T | x + skill) as its old log-prob and no advantage; its only loss is c_A * KL(pi_theta ||
pi_ref) on the skill prompt (this file's loss terms). Teacher and student are the same weights and the rows above train
only the plain prompt, which wore the teacher's skill-reading down on SmolLM2; pi-Distill trains the
skill-conditioned side as well, and this keeps it where the base had it.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.advantages import plan_match
from opid_rllib.connectors.combine import pad_rows
from opid_rllib.connectors.samples import SAMPLES, StepSamples, log, policy_module
from opid_rllib.losses import k3_kl
from opid_rllib.prompts import insert_skills, project_action
from opid_rllib.settings import TEACHER_SAMPLE_ROWS, default
SAMPLE_DELTA, ANCHOR = "sample_delta", "anchor"  # StepSamples.extra columns (only while this plug-in is on)


class TeacherSamples(ConnectorV2):
    def __init__(self, *args, teacher_sample_adv_weight: float, teacher_sample_rows: str,
                 teacher_anchor_coeff: float, **kw):
        super().__init__(*args, **kw)
        if teacher_sample_rows not in TEACHER_SAMPLE_ROWS:
            raise ValueError(f"teacher_sample_rows={teacher_sample_rows!r}: use one of {TEACHER_SAMPLE_ROWS}")
        self.weight, self.rows = float(teacher_sample_adv_weight), teacher_sample_rows
        self.anchor = float(teacher_anchor_coeff)
        self._backend = None

    def _source(self, t: StepSamples, i: int):
        """(skill prompt token ids, skill prompt text) of row i's teacher, or None."""
        if t.prompt_step[i] is not None:
            return t.prompt_step[i], insert_skills(t.prompt[i], step_skill=t.step_skill[i])
        if self.rows == "routed" and t.prompt_ep[i] is not None:
            return t.prompt_ep[i], insert_skills(t.prompt[i], episode_skill=t.episode_skill[i])
        return None

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        t.extra[SAMPLE_DELTA], t.extra[ANCHOR] = [None] * len(t), [0.0] * len(t)
        sources = {i: s for i in range(len(t)) if (s := self._source(t, i)) is not None}
        if not sources:
            return batch
        module = policy_module(rl_module)
        t0 = time.perf_counter()
        src = list(sources)
        skill_ids = [sources[i][0] for i in src]  # tokenized once, by SkillPrompts (cut prompts were dropped)
        with module.autocast():
            cfg = module.model_config
            gens = self.backend(module).generate(
                skill_ids, temperature=cfg.get("temperature", default("temperature")),
                top_p=cfg.get("top_p", default("top_p")),
                max_new_tokens=int(cfg.get("max_new_tokens", default("max_new_tokens"))))
        keep = [(i, ids, g) for i, ids, g in zip(src, skill_ids, gens) if g.token_ids]
        log(metrics, "teacher_samples/empty", len(src) - len(keep))
        if not keep:
            return batch
        resp = [list(g.token_ids) for _, _, g in keep]
        # log pi_old(y_T | x + skill) is what the sampler computed while drawing y_T (full-softmax log-probs at
        # the sampling temperature; the HF forward's equal the scorer's within 1e-4, as the runner relies on):
        # re-scoring the skill prompts was a third of this piece's time. The plain prompt must be scored.
        lp_teacher = [np.asarray(g.logprobs, np.float32) for _, _, g in keep]
        lp_student = module.score([t.prompt_ids[i] for i, _, _ in keep], resp)
        rows = new = self._rows(t, keep, resp, lp_student, lp_teacher)
        per = 1
        if self.anchor > 0:
            texts = [sources[i][1] for i, _, _ in keep]
            new, per = rows.stacked(self._anchor_rows(keep, rows, lp_teacher, texts), list(range(2 * len(keep)))), 2
        # Each source row's teacher row (then its anchor row) right after it, so every minibatch mixes the kinds.
        after = {i: [len(t) + k + r * len(keep) for r in range(per)] for k, (i, _, _) in enumerate(keep)}
        order = [j for i in range(len(t)) for j in [i, *after.get(i, [])]]
        shared_data[SAMPLES] = t.stacked(new, order)
        self._log(metrics, t, keep, rows)
        log(metrics, "timers/teacher_samples_s", time.perf_counter() - t0)
        return batch

    def backend(self, module):
        if self._backend is None:
            from opid_rllib.generation.hf import HFBackend

            stop = (module.model_config.get("backend_kwargs") or {}).get("stop")
            self._backend = HFBackend(model=module.model, tokenizer=module.tokenizer, stop=stop)
        return self._backend

    def _rows(self, t: StepSamples, keep, resp, lp_student, lp_teacher) -> StepSamples:
        """The teacher's responses as rows of the table: plain prompt x, no skill of their own (so no
        OPID Delta and no GRPO outcome term: the episode never took that action), Delta_T as advantage."""
        src = [i for i, _, _ in keep]
        # Plan match of the teacher's command (a diagnostic only): where the env gives an expert plan.
        plan = [plan_match(project_action(t.env_name[i], g.text)[0], [t.expert_action[i]])
                if t.expert_action[i] is not None and t.env_name[i] else float("nan") for i, _, g in keep]
        n = len(src)
        return StepSamples(
            prompt=[t.prompt[i] for i in src], prompt_ids=[t.prompt_ids[i] for i in src], response_ids=resp,
            sampling_logp=list(lp_student), outcome_adv=np.zeros(n, np.float32), traj_id=[t.traj_id[i] for i in src],
            step_index=t.step_index[src], on_plan=np.asarray(plan, np.float32),
            expert_action=[t.expert_action[i] for i in src], env_name=[t.env_name[i] for i in src],
            episode_skill=[None] * n, step_skill=[None] * n, prompt_ep=[None] * n, prompt_step=[None] * n,
            logp_old=list(lp_student), ratio_logp=list(lp_student), logp_ep=[None] * n, logp_step=[None] * n,
            extra={SAMPLE_DELTA: [np.asarray(a, np.float32) - np.asarray(b, np.float32)
                                  for a, b in zip(lp_teacher, lp_student)], ANCHOR: [0.0] * n})

    @staticmethod
    def _anchor_rows(keep, rows: StepSamples, lp_teacher, texts) -> StepSamples:
        """The teacher anchor's rows: the teacher rows with the skill prompt x + skill in place of x, old log-probs
        log pi_old(y_T | x + skill), no Delta_T (they already had no skill and A_out = 0), anchor = 1."""
        n = len(keep)
        return replace(rows, prompt=list(texts), prompt_ids=[list(ids) for _, ids, _ in keep],
                       sampling_logp=list(lp_teacher), logp_old=list(lp_teacher), ratio_logp=list(lp_teacher),
                       on_plan=np.full(n, np.nan, np.float32), extra={SAMPLE_DELTA: [None] * n, ANCHOR: [1.0] * n})

    @staticmethod
    def _log(metrics, t: StepSamples, keep, new: StepSamples) -> None:
        """Does the teacher choose better than the student did at the same steps (where the env has a plan)?"""
        src = [i for i, _, _ in keep]
        tok = np.concatenate([np.asarray(d) for d in new.extra[SAMPLE_DELTA]])
        log(metrics, "teacher_samples/rows", len(src))
        log(metrics, "teacher_samples/delta_token_mean", float(tok.mean()))
        log(metrics, "teacher_samples/delta_token_pos_frac", float((tok > 0).mean()))
        log(metrics, "teacher_samples/same_as_sampled_frac",
            float(np.mean([list(t.response_ids[i]) == r for i, r in zip(src, new.response_ids)])))
        has = np.isfinite(new.on_plan)
        if has.any():
            log(metrics, "teacher_samples/on_plan_frac", float(new.on_plan[has].mean()))
            log(metrics, "teacher_samples/student_on_plan_frac", float(t.on_plan[np.asarray(src)][has].mean()))


class TeacherSampleCombine:
    """CombineAdvantages' part of the plug-in: A_T = w_T * Delta_T on the teacher's rows (clipped like the other
    terms, never normalised), the anchor's rows out of the advantage, and the rows' kinds for the loss."""

    def __init__(self, *args, teacher_sample_adv_weight: float = 0.0, **kw):
        super().__init__(*args, **kw)
        self.w_sample = float(teacher_sample_adv_weight)

    def advantage_mask(self, t, mask):
        return super().advantage_mask(t, mask) * (1.0 - np.asarray(t.extra[ANCHOR], np.float32)[:, None])

    def combine_options(self, t, width, metrics):
        delta = pad_rows(t.extra[SAMPLE_DELTA], width, 0.0)  # combine_advantages masks padding
        ok = np.isfinite(delta).all(1)
        delta[~ok] = 0.0
        log(metrics, "nonfinite/sample_delta_rows", int((~ok).sum()))
        return {**super().combine_options(t, width, metrics), "delta_sample": delta, "w_sample": self.w_sample}

    def outputs(self, t, deltas):
        out = dict(super().outputs(t, deltas))
        out["teacher_rows"] = np.array([d is not None for d in t.extra[SAMPLE_DELTA]], np.float32)
        anchor = np.asarray(t.extra[ANCHOR], np.float32)
        if anchor.any():  # rows trained only toward pi_ref on the skill prompt (`loss_terms`)
            out["anchor_rows"] = anchor
        return out


def loss_terms(cfg, logp, mask, batch, ref_logp, stats) -> torch.Tensor:
    """The plug-in's loss beside the paper's, summed over tokens (mask: the student's tokens, anchor rows out):
    c_T: -c_T log pi_theta(y_T | x) on the teacher's rows, unclipped: its gradient is that of KL(pi_teacher ||
        pi_theta) at x, so the student can move toward the teacher faster than the PPO clip lets A_T move it;
    c_A: on anchor rows (x + skill, y_T) only c_A * KL(pi_theta(. | x + skill) || pi_ref(. | x + skill)): the
        teacher is these same weights and every other term trains the plain prompt, so this keeps the skill
        reading the teacher's Delta needs at the base's level.
    The KL-to-reference diagnostic is re-taken over the rows the policy sampled alone (k3 estimates the KL only
    on pi_theta's own samples, and y_T was drawn from pi_old(. | x + skill))."""
    total = torch.zeros((), device=logp.device, dtype=logp.dtype)
    rows = batch.get("teacher_rows")  # CombineAdvantages' column; a hand-made batch may leave it out (none)
    rows = torch.zeros(len(logp), 1, dtype=logp.dtype, device=logp.device) if rows is None else \
        rows[:, None].to(logp.dtype)
    if ref_logp is not None and cfg.kl_coeff:
        own = mask * (1.0 - rows)
        stats["kl_ref"], stats["kl_ref_tokens"] = (k3_kl(ref_logp, logp).detach() * own).sum(), own.sum()
    if cfg.teacher_sample_sft_coeff:
        sft = -logp * rows
        total = total + torch.where(mask > 0, cfg.teacher_sample_sft_coeff * sft, 0.0).sum()
        stats["teacher_sft_nll"] = (sft.detach() * mask).sum()
    anchor = batch.get("anchor_rows")
    if anchor is not None and cfg.teacher_anchor_coeff and bool(anchor.any()):  # a micro-batch may hold none
        if ref_logp is None:
            raise ValueError("teacher_anchor_coeff > 0 needs log pi_ref on the anchor rows")
        on = batch["response_mask"] * anchor[:, None].to(logp.dtype)
        kl = k3_kl(ref_logp, logp)
        total = total + torch.where(on > 0, cfg.teacher_anchor_coeff * kl, 0.0).sum()
        stats["teacher_anchor_kl"], stats["teacher_anchor_tokens"] = (kl.detach() * on).sum(), on.sum()
    return total
