"""opid-train's command line: every flag, its help, and a parser whose errors are one line (cli/train.py turns
the flags into a config and runs it)."""

from __future__ import annotations

import argparse

from opid_rllib.presets import PRESETS
from opid_rllib.settings import SHARDING_CHOICES

DESCRIPTION = """`opid-train`: train an LLM agent with OPID (or a baseline preset) on a text env, through Ray Tune.

Tune gives every run TensorBoard events, checkpoints and a progress table for free; `--no-tune`
runs the Algorithm in-process (also writing TensorBoard events into --output). Bad settings are
reported in one line before Ray starts.
"""


class _Formatter(argparse.HelpFormatter):
    """Shows a default only where there is one (None/False mean "the config's" or "off")."""

    def _get_help_string(self, action):
        h = action.help or ""
        if "default" not in h and action.default not in (None, False, argparse.SUPPRESS):
            h += " (default: %(default)s)"
        return h


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (`opid-train: error: argument --env: ...`), no usage dump."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from envs import ENVS
    from opid_rllib.settings import ANALYZERS
    from opid_rllib.generation.registry import BACKENDS
    from opid_rllib.prompts.skills import ROUTING_MODES
    from opid_rllib.settings import INVALID_ACTION_SOURCES
    from opid_rllib.settings import DTYPE_NAMES

    p = _OneLineParser(prog="opid-train", description=DESCRIPTION, formatter_class=_Formatter)
    g = p.add_argument_group("what to train")
    g.add_argument("--env", default=None, choices=sorted(ENVS), help="text environment (default: alfworld)")
    g.add_argument("--split", default=None, help="env split to train on (default: train)")
    g.add_argument("--model", default=None,
                   help="policy: 'tiny' (built offline; the default), 'smollm2-135m', a local HF model folder, "
                        "or a cached hub id")
    g.add_argument("--preset", default=None, choices=sorted(PRESETS),
                   help="algorithm or ablation (opid_rllib/presets.py; default: opid)")
    g.add_argument("--analyzer", default=None, choices=ANALYZERS,
                   help="who writes the hindsight skills (default: the preset's; openai reads OPENAI_API_KEY, "
                        "OPENAI_BASE_URL, OPENAI_MODEL)")
    g.add_argument("--analyzer-option", action="append", default=None, metavar="KEY=VALUE",
                   help="an analyzer_config entry, repeatable (e.g. on_plan_step_skills=3 for the hindsight "
                        "analyzer); VALUE is read as JSON, else as text")
    g.add_argument("--env-kwargs", default=None, metavar="JSON",
                   help="JSON dict of env settings merged into env_config, as opid-eval and opid-sft take "
                        "(e.g. '{\"expert\": \"sweep\"}'); split and max_steps have their own flags")
    g.add_argument("--cpu-example", action="store_true",
                   help="small sizes that run on a laptop CPU (tuned_examples/alfworld_opid_tiny_cpu.py); on "
                        "ALFWorld six fixed games (panel alfworld/cpu_example@v1), from the warm start of `opid-sft "
                        "--env alfworld --cpu-example`")
    g.add_argument("--seed", type=int, default=None,
                   help="seed for task sampling, generation and model init (default: 0)")
    g = p.add_argument_group("rollout sizes (default: OPIDConfig's, or --cpu-example's)")
    g.add_argument("--group-size", type=int, default=None, help="rollouts per task (GRPO group; 8 in the paper)")
    g.add_argument("--tasks-per-iter", type=int, default=None, help="tasks sampled per training iteration")
    g.add_argument("--max-steps", type=int, default=None, help="env step cap per episode")
    g.add_argument("--history-length", type=int, default=None,
                   help="past (observation, action) pairs shown in the prompt")
    g.add_argument("--max-new-tokens", type=int, default=None,
                   help="response token cap per step (default: 48 for --model tiny, else OPIDConfig's 512); "
                        "generation also stops after the env's closing action tag")
    g.add_argument("--max-prompt-len", type=int, default=None, help="prompt tokens kept (left-truncated)")
    g.add_argument("--generation-backend", default=None, choices=BACKENDS,
                   help="who samples responses (default hf; vllm needs the vllm extra)")
    g.add_argument("--dtype", default=None, choices=DTYPE_NAMES,
                   help="compute dtype (default float32; the learner keeps fp32 master weights under autocast, "
                        "samplers hold this dtype): bfloat16 on GPUs, and on CPUs with AVX512-BF16/AMX")
    g = p.add_argument_group("objective (default: the preset's)")
    g.add_argument("--lr", type=float, default=None, help="learning rate")
    g.add_argument("--minibatch-size", type=int, default=None,
                   help="step-samples per optimizer step (the reference's ppo_mini_batch_size, per learner; "
                        "default: one step on the whole batch per iteration)")
    g.add_argument("--episode-skill-adv-weight", type=float, default=None,
                   help="weight of the episode-skill teacher term in the advantage")
    g.add_argument("--step-skill-adv-weight", type=float, default=None,
                   help="weight of the step-skill teacher term in the advantage")
    g.add_argument("--skill-routing", default=None, choices=ROUTING_MODES,
                   help="which skill teaches which step")
    g.add_argument("--max-step-skills-per-traj", type=int, default=None,
                   help="critical steps the analyzer may write a skill for, per trajectory (5 ALFWorld/WebShop, 2 "
                        "Search)")
    g.add_argument("--invalid-action-penalty", type=float, default=None,
                   help="subtracted from a malformed step's score (0.1 ALFWorld/WebShop, 0.01 Search)")
    g.add_argument("--kl-coeff", type=float, default=None, help="KL(pi || pi_ref) penalty (0.01; 0.001 Search)")
    g.add_argument("--entropy-coeff", type=float, default=None, help="entropy bonus (0.001; 0 Search)")
    g.add_argument("--clip-ratio-low", type=float, default=None, help="PPO clip below 1 (0.2)")
    g.add_argument("--clip-ratio-high", type=float, default=None, help="PPO clip above 1 (0.2)")
    g.add_argument("--micro-batch-size", type=int, default=None,
                   help="rows per learner forward/backward (memory only: the gradient is the same)")
    g = p.add_argument_group("experimental (not in the paper: OPIDConfig.experimental, opid_rllib/experimental/)")
    g.add_argument("--teacher-sample-adv-weight", type=float, default=None,
                   help="w_T: add a response sampled under each step-skill prompt, advantage w_T * Delta (0: off)")
    g.add_argument("--teacher-sample-sft-coeff", type=float, default=None,
                   help="c_T: add -c_T * log pi(y_T | x) on those teacher samples, outside the PPO clip (0: off)")
    g.add_argument("--teacher-anchor-coeff", type=float, default=None,
                   help="c_A: add c_A * KL(pi || pi_ref) on each teacher sample under its skill prompt, keeping the "
                        "skill-conditioned teacher near the base (0: off)")
    g.add_argument("--invalid-action-source", default=None, choices=INVALID_ACTION_SOURCES,
                   help="what the invalid-action penalty counts: format (the reference), env (also rejected "
                        "commands), repeat (also a rejected repeat of the previous command)")
    g.add_argument("--normalize-teacher-adv", action="store_true", default=None,
                   help="z-score the skill terms over the batch's active tokens (normalize_teacher_adv)")
    g.add_argument("--clip-teacher-adv", type=float, default=None, help="clamp the skill terms to [-c, c]")
    g.add_argument("--opsd-loss-coeff", type=float, default=None,
                   help="GRPO+OPSD's distillation loss -c Delta log pi beside the PPO loss (0: off)")
    g = p.add_argument_group("validation during training (RLlib's config.evaluation; no analyzer, no skills)")
    g.add_argument("--eval-interval", type=int, default=None,
                   help="play --eval-panel every N iterations and after the last one, at the eval temperature; "
                        "results under evaluation/ (TensorBoard, result.json, Tune)")
    g.add_argument("--eval-panel", default=None, help="what to play, a panel name (e.g. alfworld/valid_seen@v1)")
    g.add_argument("--eval-episodes", type=int, default=None,
                   help="play K of the panel's games, in turn from each task type (as opid-eval --episodes)")
    g.add_argument("--eval-num-env-runners", type=int, default=None,
                   help="remote evaluation runners (default 0: the training runners play the evaluation)")
    g.add_argument("--asha-grace", type=int, default=None,
                   help="sweeps: stop trials early with Tune's ASHA on evaluation/success_rate, first after N "
                        "iterations (needs --eval-interval)")
    g = p.add_argument_group("run")
    g.add_argument("--stop-iters", type=int, default=2, help="training iterations")
    g.add_argument("--output", default=None,
                   help="run directory: Tune trials (or --no-tune's TensorBoard events, result.json, checkpoints "
                        "and skill dumps) go here (default ./outputs/train)")
    g.add_argument("--no-tune", action="store_true", help="train in this process with a plain loop instead of Tune")
    g.add_argument("--resume", default=None, help="checkpoint dir to continue from (--no-tune runs)")
    g.add_argument("--plan", action="store_true",
                   help="print the per-GPU memory plan for this config and exit before Ray starts "
                        "(opid_rllib/memory_plan.py)")
    g.add_argument("--checkpoint-freq", type=int, default=0, help="checkpoint every N iterations (0: never)")
    g.add_argument("--checkpoint-at-end", action=argparse.BooleanOptionalAction, default=True,
                   help="save a checkpoint after the last iteration and print where (opid-export's input); "
                        "--no-checkpoint-at-end: none")
    g.add_argument("--num-samples", type=int, default=1,
                   help="Tune: trials per point of a config's search space, seeded --seed, --seed + 1, ...; "
                        "a sweep ranks each point on the mean of its trials")
    g.add_argument("--select-panel", default=None,
                   help="sweeps: rank the points by their final policy's success on this held-out panel (e.g. "
                        "alfworld/valid_seen@v1; implies --checkpoint-at-end) instead of training success")
    g.add_argument("--select-episodes", type=int, default=None,
                   help="play N games of --select-panel, in turn from each task type")
    g.add_argument("--select-max-steps", type=int, default=None,
                   help="step cap on --select-panel (default: the env's evaluation cap, as opid-eval)")
    g.add_argument("--num-env-runners", type=int, default=None,
                   help="remote env runners (default: the config's, 0 = sample in the driver)")
    g.add_argument("--rollout-staleness", type=int, default=None,
                   help="pipelined iterations: the env runners sample the next batch while the learners update, on "
                        "weights at most N updates old (default 0: the paper's serial loop; needs "
                        "--num-env-runners >= 1)")
    g.add_argument("--num-learners", type=int, default=None,
                   help="remote learners, data-parallel (default: the config's, 0 = learn in the driver)")
    g.add_argument("--sharding", default=None, choices=SHARDING_CHOICES,
                   help="how the learners hold the policy: none (default) replicates it and averages gradients; "
                        "fsdp shards weights, gradients and AdamW state across them (FSDP2; needs --num-learners >= 2)")
    g.add_argument("--num-gpus-per-learner", type=float, default=None, help="GPUs per learner (default: the config's)")
    g.add_argument("--num-cpus", type=int, default=0,
                   help="CPUs Ray may use (0: all); a Ray session already started in this process is joined as it is")
    g.add_argument("--torch-threads", type=int, default=None,
                   help="torch CPU threads in every process (driver, env runners, learners); default 1 without "
                        "CUDA, which was many times faster than torch's own on a busy 2-core machine")
    g.add_argument("--progress-every-s", type=float, default=None,
                   help="seconds between progress lines during an iteration (phase, pace, ETA; default 10, 0: none; "
                        "sweeps under Tune print none, Tune's table is their progress)")
    g.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2, 3),
                   help="Tune's console verbosity: 1 its status table (default), 2 adds a line per result with the "
                        "whole config, 3 every result in full")
    g.add_argument("--tune-max-report-freq", type=int, default=30,
                   help="at most one Tune status table per this many seconds (and one at the end)")
    return p
