"""What makes an OPIDConfig valid: every field's type and range, the analyzer's options (built once, offline) and
the settings that only make sense together. One list of errors, each naming its field, so a config fails in one
message before Ray starts (OPIDConfig.validate raises it)."""

from __future__ import annotations

from opid_rllib.advantages import OUTCOME_MODES
from opid_rllib.analyzer.registry import ANALYZER_CHOICES
from opid_rllib.generation.registry import BACKENDS
from opid_rllib.prompts.skills import ROUTING_MODES
from opid_rllib.settings import (ANALYZERS, HINDSIGHT_RESEARCH_OPTIONS, INVALID_ACTION_SOURCES, OPID_DEFAULTS,
                                 SHARDING_CHOICES, TEACHER_SAMPLE_ROWS)

# What the HF sampler takes in backend_kwargs (generation/hf.py); vLLM's are checked where it starts.
HF_BACKEND_KWARGS = ("max_batch_size", "stop")


def _num(value) -> float:
    """float(value), or NaN (which fails every range check) for a value of the wrong kind: the type check
    names the field, where float("0.2x") or float(None) would raise past it."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def config_errors(cfg) -> list[str]:
    """Every problem of `cfg` (an OPIDConfig), one line each; [] when it is valid."""
    errors = []
    for k, (default, typ) in OPID_DEFAULTS.items():
        v = getattr(cfg, k)
        if v is None and default is None:
            continue
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            continue
        if not isinstance(v, typ):
            errors.append(f"{k}={v!r}: expected {typ.__name__}")
    checks = [
        ("outcome_adv_norm", cfg.outcome_adv_norm in OUTCOME_MODES, f"one of {OUTCOME_MODES}"),
        ("invalid_action_source", cfg.invalid_action_source in INVALID_ACTION_SOURCES,
         f"one of {INVALID_ACTION_SOURCES}"),
        ("skill_routing", cfg.skill_routing in ROUTING_MODES, f"one of {ROUTING_MODES}"),
        ("analyzer", cfg.analyzer in ANALYZERS, f"one of {ANALYZERS}"),
        ("group_size", isinstance(cfg.group_size, int) and cfg.group_size >= 1, "an int >= 1 (8 in the paper)"),
        ("tasks_per_iter", isinstance(cfg.tasks_per_iter, int) and cfg.tasks_per_iter >= 1, "an int >= 1"),
        ("train_task_ids", cfg.train_task_ids is None or (isinstance(cfg.train_task_ids, list) and cfg.train_task_ids
                                                          and all(isinstance(t, str) for t in cfg.train_task_ids)),
         "None (every task of the env) or a non-empty list of task id strings"),
        ("temperature", _num(cfg.temperature) > 0,
         "> 0 (the learner's log-probs divide the logits by it: 0, greedy sampling, is not a policy to train)"),
        ("eval_temperature", _num(cfg.eval_temperature) >= 0, ">= 0 (0: greedy evaluation)"),
        ("top_p", 0 < _num(cfg.top_p) <= 1, "in (0, 1] (1: no nucleus cut)"),
        ("history_length", _num(cfg.history_length) >= 0, ">= 0 past (observation, action) pairs in the prompt"),
        ("max_steps", _num(cfg.max_steps) >= 1, ">= 1 env steps per episode"),
        ("analyzer_num_workers", _num(cfg.analyzer_num_workers) >= 1, ">= 1 analysis threads per env runner"),
        ("score_micro_batch_size", _num(cfg.score_micro_batch_size) >= 1, ">= 1 rows per no-grad scoring pass"),
        ("kl_coeff", _num(cfg.kl_coeff) >= 0, ">= 0 (0: no KL penalty, and no reference model)"),
        ("entropy_coeff", _num(cfg.entropy_coeff) >= 0, ">= 0 (0: no entropy bonus)"),
        ("invalid_action_penalty", _num(cfg.invalid_action_penalty) >= 0, ">= 0 (0: no penalty)"),
        ("outcome_adv_weight", _num(cfg.outcome_adv_weight) >= 0, ">= 0 (0: the OPSD baseline, no outcome term)"),
        ("opsd_loss_coeff", _num(cfg.opsd_loss_coeff) >= 0, ">= 0 (0 = off)"),
        ("clip_teacher_adv", cfg.clip_teacher_adv is None or _num(cfg.clip_teacher_adv) > 0, "> 0 or None (off)"),
        ("weight_decay", _num(cfg.weight_decay) >= 0, ">= 0"),
        ("progress_interval_s", _num(cfg.progress_interval_s) >= 0, ">= 0 seconds (0: no progress lines)"),
        ("torch_threads", cfg.torch_threads is None or _num(cfg.torch_threads) >= 1, "None (auto) or >= 1"),
        ("gamma", 0 <= _num(cfg.gamma) <= 1, "in [0, 1] (it discounts the analyzer prompt's returns only)"),
        ("episode_skill_adv_weight", _num(cfg.episode_skill_adv_weight) >= 0, ">= 0"),
        ("step_skill_adv_weight", _num(cfg.step_skill_adv_weight) >= 0, ">= 0"),
        ("teacher_sample_adv_weight", _num(cfg.teacher_sample_adv_weight) >= 0, ">= 0 (0 = off)"),
        ("teacher_sample_rows", cfg.teacher_sample_rows in TEACHER_SAMPLE_ROWS, f"one of {TEACHER_SAMPLE_ROWS}"),
        ("teacher_sample_sft_coeff", _num(cfg.teacher_sample_sft_coeff) >= 0, ">= 0 (0 = off)"),
        ("teacher_anchor_coeff", _num(cfg.teacher_anchor_coeff) >= 0, ">= 0 (0 = off)"),
        ("max_step_skills_per_traj", _num(cfg.max_step_skills_per_traj) >= 0, ">= 0"),
        ("clip_ratio_low", 0 < _num(cfg.clip_ratio_low) < 1, "in (0, 1)"),
        ("clip_ratio_high", _num(cfg.clip_ratio_high) > 0, "> 0"),
        ("dual_clip_c", cfg.dual_clip_c is None or _num(cfg.dual_clip_c) > 1, "> 1 or None"),
        ("max_new_tokens", _num(cfg.max_new_tokens) >= 1, ">= 1"),
        ("max_prompt_len", _num(cfg.max_prompt_len) >= 16, ">= 16"),
        ("micro_batch_size", _num(cfg.micro_batch_size) >= 1, ">= 1"),
        ("generation_backend", cfg.generation_backend in BACKENDS, f"one of {BACKENDS}"),
        ("minibatch_size", cfg.minibatch_size is None or _num(cfg.minibatch_size) >= 1,
         "None (one optimizer step on the whole batch) or >= 1 step-samples per optimizer step"),
        ("lr", not isinstance(cfg.lr, (int, float)) or 0 < _num(cfg.lr) < float("inf"), "> 0 (or an RLlib schedule)"),
    ]
    mistyped = {e.split("=")[0] for e in errors}  # said once, by the type check
    errors += [f"{name}={getattr(cfg, name)!r}: must be {want}" for name, ok, want in checks
               if not ok and name not in mistyped]
    errors += _teacher_sample_errors(cfg)
    from opid_rllib.models.lora import lora_errors

    errors += lora_errors(cfg.lora)
    if cfg.analyzer in ANALYZER_CHOICES and isinstance(cfg.analyzer_config, dict):
        from opid_rllib.analyzer.registry import make_analyzer

        err = None
        research = sorted(set(cfg.analyzer_config) & set(HINDSIGHT_RESEARCH_OPTIONS))
        if "max_step_skills" in cfg.analyzer_config:
            err = "max_step_skills is set by max_step_skills_per_traj; remove it from analyzer_config"
        elif research:
            err = (f"{research[0]} is a research switch; set it with OPIDConfig().experimental(hindsight_options="
                   f"{{{research[0]!r}: ...}})")
        elif cfg.hindsight_options and cfg.analyzer != "hindsight":
            err = f"hindsight_options={cfg.hindsight_options!r}: only for analyzer='hindsight' (or 'none')"
        else:  # building one is offline and cheap (no request is sent): it checks the keys and the values
            # The key is read where the analyzer runs (an env runner), so a placeholder stands in for it here.
            no_key = {} if cfg.analyzer == "hindsight" else {"api_key": "placeholder-for-validation"}
            try:
                make_analyzer(cfg.analyzer, **{**cfg.analyzer_config, **analyzer_research_kwargs(cfg), **no_key})
            except ValueError as e:
                err = str(e)
        if err:
            errors.append(f"analyzer_config: {err}")
    unknown = sorted(set(cfg.hindsight_options or {}) - set(HINDSIGHT_RESEARCH_OPTIONS)) \
        if isinstance(cfg.hindsight_options, dict) else []
    if unknown:
        errors.append(f"hindsight_options: unknown switch {unknown[0]!r}; use {HINDSIGHT_RESEARCH_OPTIONS}")
    if isinstance(cfg.analyzer_config, dict) and cfg.analyzer_config.get("api_key"):
        errors.append("analyzer_config['api_key']: do not put keys in the config (RLlib and Tune write it to "
                      "checkpoints, params.json and results); export OPENAI_API_KEY, or name another "
                      "variable with analyzer_config['api_key_env']")
    if cfg.shuffle_skills is True and cfg.content_free_skills is True:
        errors.append("content_free_skills=True: shuffle_skills=True is the other control; set one of them")
    errors += _backend_kwargs_errors(cfg)
    from opid_rllib.evaluation import evaluation_errors

    errors += evaluation_errors(cfg)
    errors += sharding_errors(cfg)
    errors += pipeline_errors(cfg)
    if cfg.num_learners > 1 and cfg.tasks_per_iter < cfg.num_learners:
        errors.append(f"tasks_per_iter={cfg.tasks_per_iter}: must be >= num_learners={cfg.num_learners} "
                      "(groups are never split across learners)")
    return errors


def analyzer_research_kwargs(cfg) -> dict:
    """The hindsight analyzer's known research switches (experimental(hindsight_options=...)), to build it with."""
    options = cfg.hindsight_options if isinstance(cfg.hindsight_options, dict) else {}
    return {k: v for k, v in options.items() if k in HINDSIGHT_RESEARCH_OPTIONS}


def _backend_kwargs_errors(cfg) -> list[str]:
    """A typo or a vLLM-only key in backend_kwargs used to be dropped silently by the HF sampler."""
    if cfg.generation_backend != "hf" or not isinstance(cfg.backend_kwargs, dict):
        return []
    return [f"backend_kwargs[{k!r}]: the hf backend takes only {HF_BACKEND_KWARGS}; remove it (or set "
            "generation_backend='vllm' for vLLM's options)" for k in sorted(set(cfg.backend_kwargs) - set(HF_BACKEND_KWARGS))]


def _teacher_sample_errors(cfg) -> list[str]:
    """Teacher samples are drawn on skill-routed rows: a setting that routes none would silently do nothing."""
    w = cfg.teacher_sample_adv_weight
    if not isinstance(w, (int, float)) or w <= 0:
        on = {k: getattr(cfg, k) for k in ("teacher_sample_sft_coeff", "teacher_anchor_coeff")}
        return [f"{k}={c}: applies to teacher-sampled rows, and teacher_sample_adv_weight=0 draws none; set "
                "teacher_sample_adv_weight > 0" for k, c in on.items() if isinstance(c, (int, float)) and c > 0]
    if cfg.analyzer == "none":
        return [f"teacher_sample_adv_weight={w}: needs an analyzer (analyzer='none' writes no skills)"]
    if cfg.teacher_sample_rows == "step" and not cfg.step_skill_adv_weight:
        return [f"teacher_sample_adv_weight={w}: with teacher_sample_rows='step' it samples on rows routed to a "
                "step skill, and step_skill_adv_weight=0 routes none; set it > 0 or teacher_sample_rows='routed'"]
    if cfg.teacher_sample_rows == "routed" and not (cfg.step_skill_adv_weight or cfg.episode_skill_adv_weight):
        return [f"teacher_sample_adv_weight={w}: both skill weights are 0, so no row is routed to a skill"]
    return []


def sharding_errors(cfg) -> list[str]:
    """What `sharding` cannot be combined with, one line each (before Ray starts, not in a learner's traceback)."""
    if cfg.sharding not in SHARDING_CHOICES:
        return [f"sharding={cfg.sharding!r}: must be one of {SHARDING_CHOICES}"]
    if cfg.sharding == "none":
        return []
    errors = []
    if cfg.num_learners < 2:
        errors.append(f"sharding='fsdp' needs num_learners >= 2 (got {cfg.num_learners}): it splits the policy "
                      "across learners; one learner holds it whole")
    if cfg.lora:
        errors.append("sharding='fsdp' with lora: not supported; LoRA trains small adapters, so replicate "
                      "(sharding='none')")
    if cfg.grad_clip is not None and cfg.grad_clip_by == "norm":
        errors.append("sharding='fsdp' with grad_clip_by='norm': a per-tensor norm would be each shard's; use "
                      "'global_norm' (the whole model's) or 'value'")
    return errors


def pipeline_errors(cfg) -> list[str]:
    """What pipelined iterations (rollout_staleness > 0, pipeline.py) need, one line each."""
    n = cfg.rollout_staleness
    if not isinstance(n, int) or isinstance(n, bool):
        return []  # named by the type check
    errors = []
    if n < 0:
        errors.append(f"rollout_staleness={n}: must be an int >= 0 (0: the serial loop; 1: sample the next batch "
                      "while the learners update)")
    if _num(cfg.importance_sampling_cap) <= 0:
        errors.append(f"importance_sampling_cap={cfg.importance_sampling_cap!r}: must be > 0 (2 in verl and TRL)")
    if _num(cfg.analysis_deadline_s) < 0:
        errors.append(f"analysis_deadline_s={cfg.analysis_deadline_s!r}: must be >= 0 seconds")
    if n > 0 and cfg.num_env_runners < 1 and not getattr(cfg, "in_evaluation", False):  # evaluation: no training
        errors.append(f"rollout_staleness={n}: pipelined iterations need remote env runners to sample while the "
                      "learners update; with num_env_runners=0 the driver samples itself and cannot overlap; set "
                      "num_env_runners >= 1 (opid-train --num-env-runners 1) or rollout_staleness=0")
    if n > 0 and cfg.skills_in_rollout_prompt:
        errors.append(f"rollout_staleness={n} with skills_in_rollout_prompt (the Skill-GRPO preset): not supported "
                      "(its runners would read skills that are still in flight); set rollout_staleness=0")
    return errors
