"""Algorithm presets: OPID, its baselines and the paper's ablations, all on one code path.

Each preset is a plain dict of OPIDConfig settings applied on top of the defaults.
Choices where the paper/reference is silent are written next to the setting.
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    # The paper's method: GRPO + critical-first skill teacher term, reference weights.
    "opid": {},
    # Outcome-only GRPO: no analyzer, no skill term.
    "grpo": {"analyzer": "none", "episode_skill_adv_weight": 0.0, "step_skill_adv_weight": 0.0},
    # OPSD: skill self-distillation only, no outcome advantage. With the outcome term gone the
    # teacher term is the whole signal, so it gets weight 1.0 (our choice; no reference value).
    "opsd": {"outcome_adv_weight": 0.0, "episode_skill_adv_weight": 1.0, "step_skill_adv_weight": 1.0},
    # GRPO + OPSD: outcome advantage plus a separate distillation loss -c * Delta * log pi.
    # c = 0.01 is our choice (the reference's opd_loss_coef path is off in every script).
    "grpo_opsd": {"skill_adv_in_advantage": False, "opsd_loss_coeff": 0.01},
    # Skill-GRPO: hindsight skills of earlier rollouts of the task shown in the rollout prompt
    # during training (never at evaluation); GRPO signal only.
    "skill_grpo": {"skills_in_rollout_prompt": True, "episode_skill_adv_weight": 0.0, "step_skill_adv_weight": 0.0},
    # Ablations from the paper.
    "no_episode_skill": {"episode_skill_adv_weight": 0.0},
    "no_step_skill": {"step_skill_adv_weight": 0.0},
    "additive": {"skill_routing": "additive"},
    # Control for prompt noise (issue: "OPID with shuffled skills"): each trajectory gets the skills
    # written for another task; a gain that survives this is not guidance.
    "opid_shuffled": {"shuffle_skills": True},
    "opid_content_free": {"content_free_skills": True},
}

# Sizes that run end to end on a 2-core laptop CPU with the tiny model (nanoGPT spirit), about 2 min an iteration:
# the learning gate's rung-1 sizes (tuned_examples/alfworld_rung1.py), 8 copies of 3 games an iteration, 12 steps,
# lr 2e-4, which that gate saw reach its warm start + 15 points on 3 seeds. On ALFWorld the example trains on six
# fixed games, from the warm start `opid-sft --env alfworld --cpu-example` (cpu_example_settings).
# Why the example did not learn before (issue 92; docs/RESULTS.md, "The CPU example learns", python -m
# bench.cpu_example): it drew its tasks from all 330 ALFWorld train games, and the README started it from the untrained
# tiny model: no wins, so GRPO's groups had nothing to learn from. On the six games from their warm start the earlier
# sizes (4 copies x 4 games, 20 steps, lr 1e-4) rose there too, more than these in 10 iterations (3 seeds each), though
# with 4 copies half of an iteration's groups were all won or all lost (no outcome contrast for GRPO), with 8 a third
# to a half. max_new_tokens 48: the quickstart's warm start answers with a short reasoning in ~28 tokens (35 max), and
# generation stops at the closing action tag.
CPU_TINY = {
    "llm_model": "tiny", "group_size": 8, "tasks_per_iter": 3, "max_steps": 12, "history_length": 2,
    "max_new_tokens": 48, "max_prompt_len": 1024, "micro_batch_size": 32, "score_micro_batch_size": 32,
    "lr": 2e-4, "analyzer_num_workers": 2,
}


def cpu_example_settings(env: str = "alfworld", split: str = "train") -> dict:
    """CPU_TINY, and on ALFWorld's train split six fixed games (the panel alfworld/cpu_example@v1, which `opid-sft
    --env alfworld --cpu-example` warm-starts on): a 3M-parameter model learns games it was warm-started on, not
    ALFWorld at large, so on random games it would win nothing and learn nothing."""
    if env == "alfworld" and split == "train":
        from envs.alfworld.panels import CPU_EXAMPLE_GAMES

        return dict(CPU_TINY, train_task_ids=list(CPU_EXAMPLE_GAMES))
    return dict(CPU_TINY)


# Per-model settings the CLIs use when the user gave none. An untrained tiny model rarely closes its
# action tag, so it would write max_new_tokens (512 by default) every step: 48 fits its SFT'd
# answers (see CPU_TINY). Other models keep OPIDConfig's defaults.
MODEL_DEFAULTS: dict[str, dict] = {"tiny": {"max_new_tokens": 48}}


def model_default(model: str, key: str, fallback=None):
    """MODEL_DEFAULTS[model][key], else `fallback`."""
    return MODEL_DEFAULTS.get(str(model).strip(), {}).get(key, fallback)


def apply_settings(cfg, **settings):
    """Settings by name through the public builders: research ones (settings.EXPERIMENTAL_SETTINGS) through
    .experimental(), every other through .training() (which takes RLlib's training settings and every OPID one).
    The hindsight analyzer's research switches given in analyzer_config go to experimental(hindsight_options=...),
    so a recipe's flat settings dict (and opid-train's --analyzer-option) keeps working."""
    from opid_rllib.settings import EXPERIMENTAL_SETTINGS, HINDSIGHT_RESEARCH_OPTIONS

    research = {k: settings.pop(k) for k in list(settings) if k in EXPERIMENTAL_SETTINGS}
    options = settings.get("analyzer_config")
    if isinstance(options, dict) and set(options) & set(HINDSIGHT_RESEARCH_OPTIONS):
        settings["analyzer_config"] = {k: v for k, v in options.items() if k not in HINDSIGHT_RESEARCH_OPTIONS}
        research["hindsight_options"] = {**dict(cfg.hindsight_options or {}), **research.get("hindsight_options", {}),
                                         **{k: v for k, v in options.items() if k in HINDSIGHT_RESEARCH_OPTIONS}}
    cfg.training(**settings)
    return cfg.experimental(**research) if research else cfg


def apply_preset(cfg, name: str, **overrides):
    """The preset's settings, then `overrides`, on `cfg` (public builders only)."""
    if name not in PRESETS:
        raise ValueError(f"preset={name!r}: unknown; choose one of {sorted(PRESETS)}")
    return apply_settings(cfg, **dict(PRESETS[name], **overrides))
