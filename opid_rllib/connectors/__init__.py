"""The OPID learner connector pipeline, one concept per file, in execution order."""

from opid_rllib.connectors.attach_skills import AttachSkills
from opid_rllib.connectors.augment_prompts import BuildSkillPrompts
from opid_rllib.connectors.combine_advantages import CombineAdvantages
from opid_rllib.connectors.episodes_to_samples import EpisodesToStepSamples
from opid_rllib.connectors.rescore import RescoreWithOldPolicy
from opid_rllib.connectors.route_skills import RouteSkills


def opid_learner_connectors(cfg) -> list:
    """Pieces for an OPIDConfig `cfg`: episodes -> skills -> routing -> prompts -> re-score -> A."""
    return [
        EpisodesToStepSamples(),
        AttachSkills(),
        RouteSkills(mode=cfg.skill_routing, w_ep=cfg.episode_skill_adv_weight, w_step=cfg.step_skill_adv_weight),
        BuildSkillPrompts(),
        RescoreWithOldPolicy(recompute_old_logp=(cfg.recompute_old_logp if cfg.recompute_old_logp is not None
                                                 else cfg.generation_backend != "hf")),
        # GRPO+OPSD scores the skill prompts but keeps Delta out of the advantage (it feeds the loss term).
        CombineAdvantages(w_ep=cfg.episode_skill_adv_weight if cfg.skill_adv_in_advantage else 0.0,
                          w_step=cfg.step_skill_adv_weight if cfg.skill_adv_in_advantage else 0.0,
                          outcome_weight=cfg.outcome_adv_weight, normalize_teacher=cfg.normalize_teacher_adv,
                          clip_teacher=cfg.clip_teacher_adv),
    ]


__all__ = ["EpisodesToStepSamples", "AttachSkills", "RouteSkills", "BuildSkillPrompts",
           "RescoreWithOldPolicy", "CombineAdvantages", "opid_learner_connectors"]
