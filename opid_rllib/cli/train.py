"""`opid-train`: train an LLM agent with OPID (or a baseline preset) on a text env, through Ray Tune.

Tune gives every run TensorBoard events, checkpoints and a progress table for free; `--no-tune`
runs the Algorithm in-process (also writing TensorBoard events into --output). Bad settings are
reported in one line before Ray starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from opid_rllib.cli import json_object_arg
from opid_rllib.cli.run_log import jsonable_result, write_tensorboard
from opid_rllib.presets import CPU_TINY, PRESETS, apply_preset, model_default
from opid_rllib.sweep_select import REPEAT_KEYS, grid_points, searched_keys, seed_trials

# What the progress table shows while a run is going.
PROGRESS_COLUMNS = {
    "training_iteration": "iter",
    "time_total_s": "time (s)",
    "opid/success_rate": "success",
    "opid/format_valid_rate": "format ok",
    "opid/episode_len_mean": "ep len",
    "learners/default_policy/kl_ref": "kl",
}

# Flags that must be >= 1 when given (checked before any config or Ray work).
_POSITIVE = ("group_size", "tasks_per_iter", "max_steps", "max_new_tokens", "stop_iters", "num_samples",
             "minibatch_size", "select_episodes", "select_max_steps")


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
    from opid_rllib.algorithm import ANALYZERS
    from opid_rllib.generation.base import BACKENDS
    from opid_rllib.groups import INVALID_ACTION_SOURCES
    from opid_rllib.routing import ROUTING_MODES
    from opid_rllib.settings import DTYPE_NAMES

    p = _OneLineParser(prog="opid-train", description=__doc__, formatter_class=_Formatter)
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
                   help="small sizes that run on a laptop CPU (tuned_examples/alfworld_opid_tiny_cpu.py)")
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
    g.add_argument("--skill-routing", default=None, choices=ROUTING_MODES,
                   help="which skill teaches which step")
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
    g.add_argument("--checkpoint-at-end", action="store_true", help="checkpoint after the last iteration")
    g.add_argument("--num-samples", type=int, default=1,
                   help="Tune: trials per point of a config's search space, seeded --seed, --seed + 1, ...; "
                        "a sweep ranks each point on the mean of its trials")
    g.add_argument("--select-panel", default=None,
                   help="sweeps: rank the points by their final policy's success on this held-out panel (e.g. "
                        "alfworld/valid_seen@v1; implies --checkpoint-at-end) instead of training success")
    g.add_argument("--select-episodes", type=int, default=None, help="play only the first N games of --select-panel")
    g.add_argument("--select-max-steps", type=int, default=None,
                   help="step cap on --select-panel (default: the env's evaluation cap, as opid-eval)")
    g.add_argument("--num-env-runners", type=int, default=None,
                   help="remote env runners (default: the config's, 0 = sample in the driver)")
    g.add_argument("--num-learners", type=int, default=None,
                   help="remote learners, data-parallel (default: the config's, 0 = learn in the driver)")
    g.add_argument("--num-gpus-per-learner", type=float, default=None, help="GPUs per learner (default: the config's)")
    g.add_argument("--num-cpus", type=int, default=0, help="CPUs Ray may use (0: all)")
    g.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2, 3), help="Tune's console verbosity")
    g.add_argument("--tune-max-report-freq", type=int, default=5, help="seconds between Tune progress tables")
    return p


def config_from_args(args):
    from opid_rllib.algorithm import OPIDConfig

    cfg = OPIDConfig().environment(args.env or "alfworld", env_config={"split": args.split or "train"})
    if args.cpu_example:
        cfg = apply_preset(cfg, "opid", **CPU_TINY)
        cfg.env_config["max_steps"] = CPU_TINY["max_steps"]
    cfg = apply_preset(cfg, args.preset or "opid")
    model = args.model or "tiny"
    cfg.llm(llm_model=model)
    if args.max_new_tokens is None and not args.cpu_example:
        default = model_default(model, "max_new_tokens")
        if default is not None:
            cfg.llm(max_new_tokens=default)
    cfg.debugging(seed=0 if args.seed is None else args.seed)
    return apply_overrides(cfg, args)


# Command-line settings a prepared config (opid-train's or a tuned example's) takes when given.
_LLM_FLAGS = {"model": "llm_model", "max_new_tokens": "max_new_tokens", "max_prompt_len": "max_prompt_len",
              "history_length": "history_length", "max_steps": "max_steps", "generation_backend": "generation_backend",
              "dtype": "dtype"}
_TRAIN_FLAGS = ("group_size", "tasks_per_iter", "lr", "minibatch_size", "episode_skill_adv_weight",
                "step_skill_adv_weight", "skill_routing", "teacher_sample_adv_weight", "normalize_teacher_adv",
                "teacher_sample_sft_coeff", "teacher_anchor_coeff", "invalid_action_source")
# What a tuned example's file fixes: changing it is editing the example, not a flag.
_EXAMPLE_FIXED = ("env", "split", "preset", "cpu_example")


def apply_overrides(cfg, args):
    """The flags given on the command line, on top of `cfg` (a flag left out keeps the config's value).

    Why: `python tuned_examples/X.py --model runs/base --max-steps 15` must train that model for 15 steps,
    not silently ignore the flags.
    """
    llm = {key: getattr(args, flag) for flag, key in _LLM_FLAGS.items() if getattr(args, flag, None) is not None}
    train = {k: getattr(args, k) for k in _TRAIN_FLAGS if getattr(args, k, None) is not None}
    if llm:
        cfg.llm(**llm)
    if train:
        cfg.training(**train)
    if getattr(args, "seed", None) is not None:
        cfg.debugging(seed=args.seed)
    if getattr(args, "analyzer", None) is not None:
        cfg.analyzer_settings(analyzer=args.analyzer)
    if getattr(args, "analyzer_option", None):
        cfg.analyzer_settings(analyzer_config={**dict(cfg.analyzer_config or {}), **analyzer_options(args)})
    if getattr(args, "env_kwargs", None):
        cfg.env_config.update(json_object_arg("--env-kwargs", args.env_kwargs))
    if getattr(args, "max_steps", None) is not None:
        cfg.env_config["max_steps"] = args.max_steps
    return cfg


def analyzer_options(args) -> dict:
    """--analyzer-option KEY=VALUE ... as a dict (VALUE as JSON when it parses: 3, 0.5, true; else text)."""
    out = {}
    for item in getattr(args, "analyzer_option", None) or ():
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--analyzer-option {item!r}: must be KEY=VALUE, e.g. on_plan_step_skills=3")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def example_flag_error(args) -> str | None:
    """One-line error for a flag that would contradict what a tuned example's file sets."""
    for name in _EXAMPLE_FIXED:
        if getattr(args, name, None):
            return (f"--{name.replace('_', '-')}: set by the tuned example's config; edit the example (or use "
                    f"opid-train) instead")
    return None


def check_args(args) -> str | None:
    """One-line error for a flag out of range (None if all are fine)."""
    for name in _POSITIVE:
        v = getattr(args, name, None)
        if v is not None and v < 1:
            return f"--{name.replace('_', '-')} {v}: must be >= 1"
    try:
        analyzer_options(args)
        if getattr(args, "env_kwargs", None) is not None:
            own = sorted(set(json_object_arg("--env-kwargs", args.env_kwargs)) & {"split", "max_steps"})
            if own:
                return f"--env-kwargs: {own[0]!r} has its own flag; use --{own[0].replace('_', '-')}"
    except ValueError as e:
        return str(e)
    for name in ("history_length", "checkpoint_freq", "num_cpus", "num_env_runners", "num_learners"):
        v = getattr(args, name, None)
        if v is not None and v < 0:
            return f"--{name.replace('_', '-')} {v}: must be >= 0"
    return None


def check_config(cfg) -> str | None:
    """What would otherwise fail only inside Ray actors, a minute in: env name, model, settings."""
    import envs
    from gymnasium.envs.registration import registry

    if isinstance(cfg.env, str) and cfg.env not in envs.ENVS and cfg.env not in registry:
        return f"--env {cfg.env!r}: unknown env; use one of {sorted(envs.ENVS)} or a registered gymnasium id"
    if isinstance(cfg.llm_model, str):
        from opid_rllib.eval.panel import EvalError, resolve_model_path

        try:
            resolve_model_path(cfg.llm_model)  # builds/caches 'tiny' once, as the actors would
        except EvalError as e:
            return str(e)
    for point in grid_points(cfg):  # a sweep: every point, or Tune would fail on the bad one, Ray started
        probe = cfg.copy(copy_frozen=False)
        for k, v in point.items():
            setattr(probe, k, v)
        try:
            probe.validate()
        except ValueError as e:
            where = f"grid point {point}: " if point else ""
            return where + " ".join(str(e).split())
    return None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    err = check_args(args)
    if err:
        print(f"opid-train: error: {err}", file=sys.stderr)
        return 2
    return run_experiment(config_from_args(args), args)


def run_experiment(cfg, args=None) -> int:
    """Run a prepared OPIDConfig with the command line's run settings (stop, output, Tune, ...).

    `args` may be an argv list, a parsed Namespace or None (sys.argv). The tuned examples call this.
    """
    # Tune's newer console output ignores custom reporters; ours shows OPID's own columns.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    if not isinstance(args, argparse.Namespace):  # a tuned example: its config, then the flags given
        args = build_parser().parse_args(args)
        err = example_flag_error(args) or check_args(args)
        if err:
            print(f"opid-train: error: {err}", file=sys.stderr)
            return 2
        cfg = apply_overrides(cfg, args)
    if args.num_env_runners is not None:
        cfg.env_runners(num_env_runners=args.num_env_runners)
    if args.num_learners is not None:
        cfg.learners(num_learners=args.num_learners)
    if args.num_gpus_per_learner is not None:
        cfg.learners(num_gpus_per_learner=args.num_gpus_per_learner)
    if getattr(args, "plan", False):  # before Ray starts
        from opid_rllib.memory_plan import print_config_plan

        return print_config_plan(cfg)
    num_samples = seed_trials(cfg, 1 if args.no_tune else args.num_samples)
    err = check_args(args) or check_config(cfg) or _selection_error(cfg, args)
    if err:  # before Ray starts and before --output is created
        print(f"opid-train: error: {err}", file=sys.stderr)
        return 2
    import ray
    from ray import tune

    output = os.path.abspath(args.output or os.path.join("outputs", "train"))
    os.makedirs(output, exist_ok=True)
    ray.init(num_cpus=args.num_cpus or None, ignore_reinit_error=True, include_dashboard=False)
    try:
        if args.no_tune:
            return _run_no_tune(cfg, args, output)
        reporter = tune.CLIReporter(metric_columns=PROGRESS_COLUMNS, max_report_frequency=args.tune_max_report_freq)
        tuner = tune.Tuner(
            "OPID", param_space=cfg,
            tune_config=tune.TuneConfig(num_samples=num_samples),
            run_config=tune.RunConfig(
                storage_path=output, name=f"{args.preset or 'opid'}-{cfg.env}",
                stop={"training_iteration": args.stop_iters},
                verbose=args.verbose, progress_reporter=reporter,
                # Skill dumps live in the trial's working dir: copy them to --output too.
                sync_config=tune.SyncConfig(sync_artifacts=True),
                checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=args.checkpoint_freq,
                                                        checkpoint_at_end=args.checkpoint_at_end
                                                        or bool(args.select_panel))))
        grid = tuner.fit()
        errors = [r.error for r in grid if r.error]
        for r in grid:
            print(f"trial {r.path}: success_rate={_get(r.metrics, 'opid/success_rate')} "
                  f"checkpoint={r.checkpoint.path if r.checkpoint else None}")
        keys = searched_keys(cfg)
        if keys:
            from opid_rllib.sweep_panel import write_selection

            write_selection(grid, keys, output, panel=args.select_panel,
                            episodes=args.select_episodes, max_steps=args.select_max_steps)
        return 1 if errors else 0
    finally:
        ray.shutdown()


def _run_no_tune(cfg, args, output) -> int:
    """In-process loop; writes TensorBoard events, result.json lines and skill dumps into `output`."""
    from tensorboardX import SummaryWriter

    cfg.analyzer_settings(run_dir=output)
    algo = cfg.build_algo()
    writer = SummaryWriter(output)
    results_file = open(os.path.join(output, "result.json"), "a")
    if args.resume:
        algo.restore_from_path(os.path.abspath(args.resume))
        print(f"resumed from {args.resume} at iteration {algo.iteration}")
    last = {}
    while algo.iteration < args.stop_iters:
        t0 = time.time()
        last = algo.train()
        it = algo.iteration
        write_tensorboard(writer, last, it)
        results_file.write(json.dumps(jsonable_result(last)) + "\n")
        results_file.flush()
        print(f"iter {it}: success={_get(last, 'opid/success_rate'):.3f} "
              f"format_ok={_get(last, 'opid/format_valid_rate'):.3f} time={time.time() - t0:.1f}s", flush=True)
        if args.checkpoint_freq and it % args.checkpoint_freq == 0:
            print("checkpoint:", algo.save_to_path(os.path.join(output, f"checkpoint_{it:05d}")))
    if args.checkpoint_at_end:
        print("checkpoint:", algo.save_to_path(os.path.join(output, "checkpoint_final")))
    writer.close()
    results_file.close()
    algo.stop()
    return 0


def _selection_error(cfg, args) -> str | None:
    from opid_rllib.sweep_panel import selection_args_error

    return selection_args_error(getattr(args, "select_panel", None), getattr(args, "select_episodes", None),
                                getattr(args, "select_max_steps", None), env=cfg.env,
                                # repeats alone (seeds) are nothing to pick among
                                is_sweep=bool(set(searched_keys(cfg)) - set(REPEAT_KEYS)))


def _get(d, path, default=float("nan")):
    for k in path.split("/"):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


if __name__ == "__main__":
    sys.exit(main())
