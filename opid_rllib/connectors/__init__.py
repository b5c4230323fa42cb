"""The OPID learner connector pipeline, one concept per piece, in execution order:

    outcome.py        OutcomeAdvantage       A_out = GRPO group statistics of S_i = R - penalty * (1 - valid_i)
    samples.py        EpisodesToStepSamples  episodes -> the typed step-sample table (StepSamples)
    skill_prompts.py  SkillPrompts           usable analysis -> critical-first routing -> skill prompts
    rescore.py        RescoreWithOldPolicy   log pi_old(y | x), log pi_old(y | x + skill)
    combine.py        CombineAdvantages      A = A_out + w_ep Delta_ep + w_step Delta_step -> loss batch

Research plug-ins (opid_rllib/experimental/) add a piece before CombineAdvantages or extend it, only when on.
"""

from opid_rllib.connectors.combine import CombineAdvantages
from opid_rllib.connectors.outcome import OutcomeAdvantage
from opid_rllib.connectors.rescore import RescoreWithOldPolicy
from opid_rllib.connectors.samples import SAMPLES, EpisodesToStepSamples, StepSamples
from opid_rllib.connectors.skill_prompts import SkillPrompts


def opid_learner_connectors(cfg, device=None, plugins=()) -> list:
    """Pieces for an OPIDConfig `cfg`; tensors for the loss are created on `device`. `plugins`: the research
    plug-ins switched on (experimental.plugins(cfg); OPIDConfig.build_learner_connector passes them), so this
    package never imports the research code."""
    on = list(plugins)
    combine = CombineAdvantages
    mixins = tuple(p.combine_mixin for p in on if p.combine_mixin is not None)
    if mixins:  # each plug-in's part of the combination, over the paper's
        combine = type("CombineAdvantages", (*mixins, CombineAdvantages), {})
    return [
        OutcomeAdvantage(invalid_action_penalty=cfg.invalid_action_penalty, outcome_adv_norm=cfg.outcome_adv_norm,
                         invalid_action_source=cfg.invalid_action_source),
        EpisodesToStepSamples(),
        SkillPrompts(skill_routing=cfg.skill_routing, episode_skill_adv_weight=cfg.episode_skill_adv_weight,
                     step_skill_adv_weight=cfg.step_skill_adv_weight),
        RescoreWithOldPolicy(recompute_old_logp=recompute_old_logp(cfg), stale=cfg.rollout_staleness > 0),
        *[p.connector(cfg) for p in on if p.connector is not None],
        combine(episode_skill_adv_weight=cfg.episode_skill_adv_weight, step_skill_adv_weight=cfg.step_skill_adv_weight,
                outcome_adv_weight=cfg.outcome_adv_weight, device=device,
                importance_sampling_cap=importance_sampling_cap(cfg),
                **{k: getattr(cfg, k) for p in on for k in p.combine_settings}),
    ]


def recompute_old_logp(cfg) -> bool:
    """Whether the learner recomputes log pi_old instead of taking the sampler's (None = auto): whenever the sampler
    may hold other weights or kernels than the learner's forward: vLLM, or a compute dtype other than float32
    (bf16/fp16 samplers hold cast weights, the learner fp32 masters under autocast). Recomputing also logs the gap
    (rescore.py), so the mismatch is measured, not assumed away."""
    if cfg.recompute_old_logp is not None:
        return bool(cfg.recompute_old_logp)
    if cfg.rollout_staleness > 0:  # a stale batch: the ratio against the sampler's own log-probs (pipeline.py)
        return False
    return cfg.generation_backend != "hf" or cfg.dtype != "float32"


def importance_sampling_cap(cfg) -> float | None:
    """The truncated importance weight's cap for a stale batch whose PPO ratio is taken against the recomputed
    log-probs (rollout_staleness > 0 with recompute_old_logp=True; pipeline.py); None (no weight) in the serial loop,
    where the sampler held the learner's weights, and with the pipelined default, the ratio against the sampler's own
    log-probs."""
    if cfg.rollout_staleness > 0 and recompute_old_logp(cfg):
        return float(cfg.importance_sampling_cap)
    return None


__all__ = ["SAMPLES", "StepSamples", "OutcomeAdvantage", "EpisodesToStepSamples", "SkillPrompts",
           "RescoreWithOldPolicy", "CombineAdvantages", "opid_learner_connectors", "recompute_old_logp",
           "importance_sampling_cap"]
