"""OPIDConfig's typed settings: every OPID-specific name with its default and type, in one table.

Why a module of its own: the presets, the CLIs, the benches and OPIDConfig itself read this table (unknown
names are refused against it), and it is data, not the algorithm.
"""

from __future__ import annotations

from typing import Any

from opid_rllib.analyzer.registry import ANALYZER_CHOICES

# Compute dtypes (OPIDConfig.dtype, the CLIs' --dtype). SFT trains without loss scaling, so not in float16.
DTYPE_NAMES = ("float32", "bfloat16", "float16")
# How N learners hold the policy (OPIDConfig.sharding, opid-train --sharding).
SHARDING_CHOICES = ("none", "fsdp")
SFT_DTYPE_NAMES = ("float32", "bfloat16")

# Typed OPID settings: name -> (default, type). Defaults follow the reference's scripts
# (opid_reference.md sections 5-6); the CPU examples in tuned_examples/ shrink sizes.
OPID_DEFAULTS: dict[str, tuple[Any, type]] = {
    # LLM / rollout
    "llm_model": ("tiny", str), "dtype": ("float32", str), "generation_backend": ("hf", str),
    "backend_kwargs": ({}, dict), "max_new_tokens": (512, int), "max_prompt_len": (2048, int),
    "temperature": (1.0, float), "top_p": (1.0, float), "eval_temperature": (0.4, float),
    "history_length": (5, int), "max_steps": (30, int), "enable_thinking": (False, bool),
    "gradient_checkpointing": (False, bool), "score_micro_batch_size": (8, int),
    # torch CPU threads in each process that builds the policy (driver, env runners, learners): None = 1 on a
    # machine without CUDA (faster on small shared CPUs, quiet.default_torch_threads), torch's own with CUDA.
    "torch_threads": (None, int),
    # Seconds between the driver's progress lines during an iteration (progress.py); 0: none (opid-train's sweeps).
    "progress_interval_s": (10.0, float),
    # LoRA adapters (peft): None, or {"r": 16, "alpha": 32, "target_modules": [...], "dropout": 0.0}.
    "lora": (None, dict),
    # How N learners hold the policy: "none" replicates it (an all-reduce of gradients, grad_sync.py); "fsdp" shards
    # weights, gradients and AdamW state across them with FSDP2 (sharding.py), for full fine-tunes past one GPU.
    "sharding": ("none", str),
    # groups
    "group_size": (8, int), "tasks_per_iter": (16, int),
    # An explicit list of the env's task ids to train on (None: all of them); the learning gate trains on a fixed
    # set of games.
    "train_task_ids": (None, list),
    # advantage
    "outcome_adv_norm": ("mean_std", str), "outcome_adv_weight": (1.0, float),
    "invalid_action_penalty": (0.1, float),
    # What the penalty counts as invalid: "format" (the reference), "env" (also commands the env rejected) or
    # "repeat" (also a rejected command equal to the previous step's).
    "invalid_action_source": ("format", str),
    "episode_skill_adv_weight": (0.001, float), "step_skill_adv_weight": (0.001, float),
    "skill_routing": ("critical_first", str),
    # None = auto (connectors.recompute_old_logp): recompute log pi_old on the learner whenever the sampler may hold
    # other weights or kernels (vLLM, or a bf16/fp16 sampler against fp32 masters), and log the gap; a float32 HF
    # sampler's log-probs equal the learner's within 1e-4 (tested), so it keeps them.
    # With rollout_staleness > 0 (pipeline.py) auto means False: the PPO ratio against the sampler's log-probs, as
    # APPO's; True takes it against log pi(y | x) recomputed at update time, with a truncated importance weight.
    "recompute_old_logp": (None, bool), "skills_in_rollout_prompt": (False, bool),
    # Pipelined iterations (pipeline.py): the remote env runners sample the next batch while the learners update,
    # on weights at most this many updates behind the learner's (0: the paper's serial loop).
    "rollout_staleness": (0, int),
    # Cap C of the truncated importance weight min(pi_prox / pi_behaviour, C) on a stale batch's tokens when the
    # PPO ratio is taken against the recomputed log-probs (pi_prox; recompute_old_logp=True); verl's and TRL's 2.
    "importance_sampling_cap": (2.0, float),
    # Pipelined: seconds after a batch reaches the driver that its update waits for analyses still in flight;
    # later ones are late (that trajectory trains on the GRPO signal, counted in opid_pipeline/late_analyses).
    "analysis_deadline_s": (60.0, float),
    # Teacher-term normalisation / clipping (experimental/teacher_norm.py; off in the reference's scripts).
    "normalize_teacher_adv": (False, bool), "clip_teacher_adv": (None, float),
    # The shuffled-skills control: every trajectory is re-scored with the skills written for a
    # trajectory of another task (routing.shuffled_skill_donors), so Delta is prompt noise only.
    "shuffle_skills": (False, bool),
    # The prompt-shift control: every skill replaced by content-free filler of the same token length
    # (groups.content_free_skills), so Delta measures what inserting that much text does to the log-probs.
    "content_free_skills": (False, bool),
    # GRPO+OPSD (experimental/opsd.py): False keeps Delta out of the advantage (it feeds opsd_loss_coeff's term).
    "skill_adv_in_advantage": (True, bool),
    # Teacher samples (experimental/teacher_samples.py, not in the paper): w_T > 0 adds, per skill-routed
    # row, a response sampled under the skill prompt with advantage w_T * Delta_T.
    "teacher_sample_adv_weight": (0.0, float), "teacher_sample_rows": ("step", str),
    # c_T > 0 adds -c_T * log pi_theta(y_T | x) on those rows, outside the PPO clip (the forward KL to the skill
    # teacher on its own samples, as pi-Distill's teacher-sampled term).
    "teacher_sample_sft_coeff": (0.0, float),
    # c_A > 0 adds, per teacher sample, the row (x + skill, y_T) whose only loss is c_A * KL(pi_theta || pi_ref) on
    # the skill prompt: the teacher is the same weights, and training the plain prompt alone wore its
    # skill-reading down (docs/STUDIES.md, SmolLM2 study); pi-Distill trains the skill-conditioned side too.
    "teacher_anchor_coeff": (0.0, float),
    # loss
    "clip_ratio_low": (0.2, float), "clip_ratio_high": (0.2, float), "dual_clip_c": (3.0, float),
    "kl_coeff": (0.01, float), "entropy_coeff": (0.001, float), "opsd_loss_coeff": (0.0, float),
    "micro_batch_size": (8, int), "weight_decay": (0.01, float),
    # analyzer
    "analyzer": ("hindsight", str), "analyzer_config": ({}, dict), "analyzer_num_workers": (8, int),
    "max_step_skills_per_traj": (5, int),
    # The reference's failed_only: analyse only trajectories that did not win (off in its scripts).
    "failed_only": (False, bool),
    # The hindsight analyzer's research switches (analyzer/hindsight.py: on_plan_step_skills, quote_sampled),
    # merged into its constructor's arguments; kept out of analyzer_config so that they pass .experimental().
    "hindsight_options": ({}, dict),
    # Where skill dumps go (None: the trial directory Tune gives the algorithm).
    "run_dir": (None, str),
    # validation during training (evaluation.py; how often and how many: RLlib's config.evaluation(...))
    "eval_panel": (None, str), "eval_task_ids": (None, list), "eval_seed": (0, int), "eval_batch_envs": (16, int),
    # False: every evaluation samples with the same seeds (curves differ by the weights only); True: the one after
    # iteration i with seeds of its own (the learning gate's "fresh seeds of the same games").
    "eval_fresh_seeds": (False, bool),
    # Also evaluate after this iteration (the run's last; opid-train sets it from --stop-iters).
    "eval_final_iteration": (None, int),
}
# gamma (RLlib's) discounts nothing in training (GRPO's advantage is undiscounted): it only fills the "Return:" lines
# of the analyzer's trajectory rendering (analyzer/prompt.py's discounted_returns, as the reference's analyzer does).

# Settings that are not in the paper: research extensions and controls, set with OPIDConfig.experimental(...) (TRL
# keeps such features under trl.experimental), each with the study that motivated it (docs/STUDIES.md,
# docs/LEARNING_GATE.md). The paper's path reads without them; .training() refuses them.
EXPERIMENTAL_SETTINGS: dict[str, str] = {
    "teacher_sample_adv_weight": "teacher samples (experimental/teacher_samples.py): a response sampled under the "
                                 "skill prompt per routed row; the teacher-samples study",
    "teacher_sample_rows": "which rows draw teacher samples ('step' or 'routed'); the teacher-samples study",
    "teacher_sample_sft_coeff": "forward KL to the skill teacher on its own samples (pi-Distill's term); the "
                                "teacher-SFT study",
    "teacher_anchor_coeff": "KL(pi_theta || pi_ref) on the skill prompt, to keep skill reading; kept as the "
                            "SmolLM2 study's proposed fix, not yet measured to help",
    "shuffle_skills": "the shuffled-skills control: skills written for another task (the learning gate)",
    "content_free_skills": "the prompt-shift control: content-free filler of the skill's token length (the "
                           "learning gate)",
    "invalid_action_source": "what the invalid-action penalty counts ('format' is the reference's); the "
                             "penalty studies",
    "opsd_loss_coeff": "GRPO+OPSD's distillation loss -c Delta log pi (experimental/opsd.py; preset grpo_opsd)",
    "skill_adv_in_advantage": "False keeps Delta out of the advantage, for GRPO+OPSD (experimental/opsd.py)",
    "normalize_teacher_adv": "z-score the skill terms over the batch (experimental/teacher_norm.py; off in the "
                             "reference's scripts)",
    "clip_teacher_adv": "clamp the skill terms to [-c, c] (experimental/teacher_norm.py; off in the reference's "
                        "scripts)",
    "failed_only": "analyse only trajectories that did not win (the reference's option, off in its scripts)",
    "hindsight_options": "the hindsight analyzer's research switches (on_plan_step_skills, quote_sampled); the "
                         "learning gate's skill studies",
}
# Analyzer options that are research switches: refused in analyzer_config, taken by experimental(hindsight_options=).
HINDSIGHT_RESEARCH_OPTIONS = ("on_plan_step_skills", "quote_sampled")

def default(name: str) -> Any:
    """OPID_DEFAULTS' value for `name`: the one place a layer below the config (the RL module, a connector) reads a
    default from, so no layer keeps its own."""
    return OPID_DEFAULTS[name][0]


ANALYZERS = (*ANALYZER_CHOICES, "none")
# What the invalid-action penalty counts (connectors/outcome.step_validity) and which rows draw teacher samples.
INVALID_ACTION_SOURCES = ("format", "env", "repeat")
TEACHER_SAMPLE_ROWS = ("step", "routed")  # "none": GRPO without analysis


# RLlib's own training settings that presets, tuned examples and the benches may also set by name.
RLLIB_TRAINING_KEYS = ("lr", "minibatch_size", "num_epochs", "grad_clip", "gamma")
