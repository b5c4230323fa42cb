"""The OPID learner connector pipeline, one concept per piece, in execution order:

    samples.py        EpisodesToStepSamples  episodes -> the typed step-sample table (StepSamples)
    skill_prompts.py  SkillPrompts           analysis -> critical-first routing -> skill prompts
    rescore.py        RescoreWithOldPolicy   log pi_old(y | x), log pi_old(y | x + skill)
    teacher_samples.py TeacherSamples        opt-in: y_T ~ pi_old(. | x + skill) as extra rows (A = w_T Delta_T),
                                             and the teacher anchor's rows (x + skill, y_T)
    combine.py        CombineAdvantages      A = A_out + w_ep Delta_ep + w_step Delta_step -> loss batch

The outcome advantage A_out is computed on the driver beforehand (opid_rllib/groups.py).
"""

from opid_rllib.connectors.combine import CombineAdvantages
from opid_rllib.connectors.rescore import RescoreWithOldPolicy
from opid_rllib.connectors.samples import SAMPLES, EpisodesToStepSamples, StepSamples
from opid_rllib.connectors.skill_prompts import SkillPrompts
from opid_rllib.connectors.teacher_samples import TeacherSamples


def opid_learner_connectors(cfg, device=None) -> list:
    """Pieces for an OPIDConfig `cfg`; tensors for the loss are created on `device`."""
    # GRPO+OPSD scores the skill prompts but keeps Delta out of the advantage (it feeds the loss term).
    w_adv = 1.0 if cfg.skill_adv_in_advantage else 0.0
    recompute = cfg.recompute_old_logp if cfg.recompute_old_logp is not None else cfg.generation_backend != "hf"
    return [
        EpisodesToStepSamples(),
        SkillPrompts(mode=cfg.skill_routing, w_ep=cfg.episode_skill_adv_weight, w_step=cfg.step_skill_adv_weight),
        RescoreWithOldPolicy(recompute_old_logp=recompute),
        TeacherSamples(weight=cfg.teacher_sample_adv_weight, rows=cfg.teacher_sample_rows,
                       anchor=cfg.teacher_anchor_coeff),
        CombineAdvantages(w_ep=w_adv * cfg.episode_skill_adv_weight, w_step=w_adv * cfg.step_skill_adv_weight,
                          w_sample=cfg.teacher_sample_adv_weight,
                          outcome_weight=cfg.outcome_adv_weight, normalize_teacher=cfg.normalize_teacher_adv,
                          clip_teacher=cfg.clip_teacher_adv, device=device),
    ]


__all__ = ["SAMPLES", "StepSamples", "EpisodesToStepSamples", "SkillPrompts", "RescoreWithOldPolicy",
           "TeacherSamples", "CombineAdvantages", "opid_learner_connectors"]
