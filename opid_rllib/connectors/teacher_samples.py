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
pi_ref) on the skill prompt (losses.py). Teacher and student are the same weights and the rows above train
only the plain prompt, which wore the teacher's skill-reading down on SmolLM2; pi-Distill trains the
skill-conditioned side as well, and this keeps it where the base had it.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.advantages import plan_match
from opid_rllib.connectors.common import log, policy_module
from opid_rllib.connectors.samples import SAMPLES, StepSamples
from opid_rllib.prompts import project_action

TEACHER_SAMPLE_ROWS = ("step", "routed")


class TeacherSamples(ConnectorV2):
    def __init__(self, *args, weight: float = 0.0, rows: str = "step", anchor: float = 0.0, **kw):
        super().__init__(*args, **kw)
        if rows not in TEACHER_SAMPLE_ROWS:
            raise ValueError(f"teacher_sample_rows={rows!r}: use one of {TEACHER_SAMPLE_ROWS}")
        self.weight, self.rows, self.anchor = float(weight), rows, float(anchor)
        self._backend = None

    def _skill_prompt(self, t: StepSamples, i: int):
        if self.rows == "step":
            return t.prompt_step[i]
        return t.prompt_step[i] if t.prompt_step[i] is not None else t.prompt_ep[i]

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        src = [i for i in range(len(t)) if self._skill_prompt(t, i) is not None] if self.weight > 0 else []
        if not src:
            return batch
        module = policy_module(rl_module)
        t0 = time.perf_counter()
        skill_ids, _ = module.encode_prompts([self._skill_prompt(t, i) for i in src])  # cut ones were dropped
        with module.autocast():
            cfg = module.model_config
            gens = self.backend(module).generate(
                skill_ids, temperature=cfg.get("temperature", 1.0), top_p=cfg.get("top_p", 1.0),
                max_new_tokens=int(cfg.get("max_new_tokens", 64)))
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
            new, per = rows.stacked(self._anchor_rows(t, keep, rows, lp_teacher), list(range(2 * len(keep)))), 2
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
            prompt=[t.prompt[i] for i in src], response_ids=resp, sampling_logp=list(lp_student),
            outcome_adv=np.zeros(n, np.float32), traj_id=[t.traj_id[i] for i in src],
            step_index=t.step_index[src], skills=[None] * n, on_plan=np.asarray(plan, np.float32),
            expert_action=[t.expert_action[i] for i in src], env_name=[t.env_name[i] for i in src],
            episode_skill=[None] * n, step_skill=[None] * n,
            prompt_ep=[None] * n, prompt_step=[None] * n, prompt_ids=[t.prompt_ids[i] for i in src],
            logp_old=list(lp_student), logp_ep=[None] * n, logp_step=[None] * n,
            sample_delta=[np.asarray(a, np.float32) - np.asarray(b, np.float32)
                          for a, b in zip(lp_teacher, lp_student)], anchor=np.zeros(n, np.float32))

    def _anchor_rows(self, t: StepSamples, keep, rows: StepSamples, lp_teacher) -> StepSamples:
        """The teacher anchor's rows: the teacher rows with the skill prompt x + skill in place of x, old log-probs
        log pi_old(y_T | x + skill), no Delta_T (they already had no skill and A_out = 0), anchor = 1."""
        n = len(keep)
        return replace(rows, prompt=[self._skill_prompt(t, i) for i, _, _ in keep],
                       prompt_ids=[list(ids) for _, ids, _ in keep], sampling_logp=list(lp_teacher),
                       logp_old=list(lp_teacher), on_plan=np.full(n, np.nan, np.float32), sample_delta=[None] * n,
                       anchor=np.ones(n, np.float32))

    @staticmethod
    def _log(metrics, t: StepSamples, keep, new: StepSamples) -> None:
        """Does the teacher choose better than the student did at the same steps (where the env has a plan)?"""
        src = [i for i, _, _ in keep]
        tok = np.concatenate([np.asarray(d) for d in new.sample_delta])
        log(metrics, "teacher_samples/rows", len(src))
        log(metrics, "teacher_samples/delta_token_mean", float(tok.mean()))
        log(metrics, "teacher_samples/delta_token_pos_frac", float((tok > 0).mean()))
        log(metrics, "teacher_samples/same_as_sampled_frac",
            float(np.mean([list(t.response_ids[i]) == r for i, r in zip(src, new.response_ids)])))
        has = np.isfinite(new.on_plan)
        if has.any():
            log(metrics, "teacher_samples/on_plan_frac", float(new.on_plan[has].mean()))
            log(metrics, "teacher_samples/student_on_plan_frac", float(t.on_plan[np.asarray(src)][has].mean()))
