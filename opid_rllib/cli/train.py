"""`opid-train`: the flags (cli/train_parser.py, whose DESCRIPTION users read in --help) made into an OPIDConfig,
checked in one line before Ray starts, then run through Ray Tune or, with `--no-tune`, in-process.
"""

from __future__ import annotations

import argparse
import os
import sys

from opid_rllib.cli import env_kwargs_arg, json_object_arg, key_value_args, warn_slow_dtype
from opid_rllib.cli.run_log import print_outputs, ray_session_dir
from opid_rllib.cli.train_loop import get_metric, run_no_tune, say_checkpoint
from opid_rllib.cli.train_parser import build_parser
from opid_rllib.cli.tune_console import plain_console_env, status_reporter
from opid_rllib.presets import CPU_TINY, apply_preset, apply_settings, cpu_example_settings, model_default
from opid_rllib.sweep_select import REPEAT_KEYS, grid_points, searched_keys, seed_trials

EVAL_METRIC = "evaluation/success_rate"  # what sweeps rank on and ASHA stops on with --eval-interval

# Flags that must be >= 1 when given (checked before any config or Ray work).
_POSITIVE = ("group_size", "tasks_per_iter", "max_steps", "max_new_tokens", "stop_iters", "num_samples",
             "torch_threads", "minibatch_size", "micro_batch_size", "select_episodes", "select_max_steps", "eval_interval", "eval_episodes",
             "asha_grace")


def config_from_args(args):
    from opid_rllib.algorithm import OPIDConfig

    cfg = OPIDConfig().environment(args.env or "alfworld", env_config={"split": args.split or "train"})
    if args.cpu_example:  # CPU sizes; on ALFWorld its six games, which opid-sft --cpu-example warm-starts on
        cfg = apply_preset(cfg, "opid", **cpu_example_settings(cfg.env, cfg.env_config["split"]))
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
              "dtype": "dtype", "torch_threads": "torch_threads", "sharding": "sharding"}
_TRAIN_FLAGS = ("group_size", "tasks_per_iter", "lr", "minibatch_size", "episode_skill_adv_weight",
                "step_skill_adv_weight", "skill_routing", "max_step_skills_per_traj", "invalid_action_penalty",
                "kl_coeff", "entropy_coeff", "clip_ratio_low", "clip_ratio_high", "micro_batch_size",
                # the experimental group's (OPIDConfig.experimental)
                "teacher_sample_adv_weight", "normalize_teacher_adv", "clip_teacher_adv", "opsd_loss_coeff",
                "teacher_sample_sft_coeff", "teacher_anchor_coeff", "invalid_action_source")
# What a tuned example's file fixes: changing it is editing the example, not a flag.
_EXAMPLE_FIXED = ("env", "split", "preset", "cpu_example")


def apply_overrides(cfg, args):
    """The flags given on the command line, on top of `cfg` (a flag left out keeps the config's value).

    Why: `python tuned_examples/X.py --model runs/base --max-steps 15` must train that model for 15 steps,
    not silently ignore the flags.
    """
    llm = {key: getattr(args, flag) for flag, key in _LLM_FLAGS.items() if getattr(args, flag, None) is not None}
    if "llm_model" in llm and os.path.isdir(os.path.expanduser(llm["llm_model"])):
        # absolute: Tune runs each trial in its own working folder, where `--model sft/` is not there
        llm["llm_model"] = os.path.abspath(os.path.expanduser(llm["llm_model"]))
    train = {k: getattr(args, k) for k in _TRAIN_FLAGS if getattr(args, k, None) is not None}
    if llm:
        cfg.llm(**llm)
    if train:  # research settings through experimental(), the rest through training()
        apply_settings(cfg, **train)
    if getattr(args, "seed", None) is not None:
        cfg.debugging(seed=args.seed)
    if getattr(args, "analyzer", None) is not None:
        cfg.analyzer_settings(analyzer=args.analyzer)
    if getattr(args, "analyzer_option", None):  # its research switches go to experimental(hindsight_options=)
        apply_settings(cfg, analyzer_config={**dict(cfg.analyzer_config or {}), **analyzer_options(args)})
    if getattr(args, "env_kwargs", None):
        cfg.env_config.update(json_object_arg("--env-kwargs", args.env_kwargs))
    if getattr(args, "max_steps", None) is not None:
        cfg.env_config["max_steps"] = args.max_steps
    if getattr(args, "eval_interval", None) is not None:
        apply_eval_flags(cfg, args)
    return cfg


def apply_eval_flags(cfg, args) -> None:
    """--eval-interval/--eval-panel/--eval-episodes as RLlib's config.evaluation(...) (evaluation.py); the run's
    last iteration (--stop-iters) is evaluated too."""
    from envs.panels import get_panel

    episodes = args.eval_episodes
    if episodes is None:
        try:
            episodes = len(get_panel(args.eval_panel).task_ids)
        except KeyError:  # named in the config's error, before Ray starts
            episodes = 1
    cfg.evaluation(evaluation_interval=args.eval_interval, evaluation_duration=episodes,
                   evaluation_duration_unit="episodes", eval_panel=args.eval_panel,
                   eval_final_iteration=getattr(args, "stop_iters", None))
    if getattr(args, "eval_num_env_runners", None) is not None:
        cfg.evaluation(evaluation_num_env_runners=args.eval_num_env_runners)


def analyzer_options(args) -> dict:
    """--analyzer-option KEY=VALUE ... as a dict (VALUE as JSON when it parses: 3, 0.5, true; else text)."""
    return key_value_args("--analyzer-option", getattr(args, "analyzer_option", None))


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
        env_kwargs_arg(getattr(args, "env_kwargs", None))
    except ValueError as e:
        return str(e)
    if getattr(args, "eval_interval", None) is None:
        for flag in ("eval_panel", "eval_episodes", "eval_num_env_runners", "asha_grace"):
            if getattr(args, flag, None) is not None:
                return f"--{flag.replace('_', '-')}: sets up validation during training; give --eval-interval N too"
    elif not getattr(args, "eval_panel", None):
        return "--eval-interval: name what to play with --eval-panel (e.g. alfworld/valid_seen@v1)"
    for name in ("history_length", "checkpoint_freq", "num_cpus", "num_env_runners", "num_learners",
                 "eval_num_env_runners"):
        v = getattr(args, name, None)
        if v is not None and v < 0:
            return f"--{name.replace('_', '-')} {v}: must be >= 0"
    resume = getattr(args, "resume", None)
    if resume and not getattr(args, "no_tune", False):  # Tune would start over from scratch, silently
        return ("--resume: goes on with a --no-tune run from one of its checkpoints; add --no-tune (a Tune "
                "experiment resumes with ray.tune.Tuner.restore)")
    if resume and not os.path.isdir(resume):
        return f"--resume {resume}: no such checkpoint folder"
    output = getattr(args, "output", None)
    if output and os.path.exists(output) and not os.path.isdir(output):
        return f"--output {output}: is a file; give a folder (it holds the run's results and checkpoints)"
    return None


def early_error(args) -> str | None:
    """A --model folder that is not there, --analyzer openai's key and server: before the config's imports (Ray,
    torch: seconds on a busy machine). check_config checks the config again, for the tuned examples."""
    from opid_rllib.analyzer.preflight import analyzer_setup_error
    from opid_rllib.eval.panel import EvalError, looks_like_path, resolve_model_path

    if args.model and looks_like_path(args.model):
        try:
            resolve_model_path(args.model)  # a folder: no build, no hub
        except EvalError as e:
            return str(e)
    return analyzer_setup_error(args.analyzer, analyzer_options(args)) if args.analyzer else None


def env_config_error(cfg) -> str | None:
    """Build the env once from env_config (--split, --env-kwargs, --max-steps, an example's settings): a bad
    setting fails here in one line, not as a traceback from the algorithm's setup with Ray started."""
    import envs

    config = dict(cfg.env_config or {})
    if not isinstance(cfg.env, str) or any(isinstance(v, dict) and "grid_search" in v for v in config.values()):
        return None  # an env class or a searched setting: built per trial
    try:
        env = envs.make(cfg.env, **config)
    except Exception as e:  # noqa: BLE001 - reported as one line naming the flags
        return (f"--split/--env-kwargs: building env {cfg.env!r} with {config} failed: "
                f"{' '.join(str(e).split())[:400]}")
    try:
        env.close()
    except Exception:  # noqa: BLE001
        pass
    return None


def check_config(cfg) -> str | None:
    """What would otherwise fail only inside Ray actors, a minute in: env name, model, settings."""
    import envs
    from gymnasium.envs.registration import registry

    if isinstance(cfg.env, str) and cfg.env not in envs.ENVS and cfg.env not in registry:
        return f"--env {cfg.env!r}: unknown env; use one of {sorted(envs.ENVS)} or a registered gymnasium id"
    if isinstance(cfg.analyzer, str):  # the key and the server, in this process: Ray's workers inherit its env
        from opid_rllib.analyzer.preflight import analyzer_setup_error

        err = analyzer_setup_error(cfg.analyzer, cfg.analyzer_config if isinstance(cfg.analyzer_config, dict)
                                   else None)
        if err:
            return err
    err = env_config_error(cfg)
    if err:
        return err
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
    err = check_args(args) or early_error(args)
    if err:
        print(f"opid-train: error: {err}", file=sys.stderr)
        return 2
    return run_experiment(config_from_args(args), args)


def run_experiment(cfg, args=None) -> int:
    """Run a prepared OPIDConfig with the command line's run settings (stop, output, Tune, ...).

    `args` may be an argv list, a parsed Namespace or None (sys.argv). The tuned examples call this.
    """
    plain_console_env()  # Tune's reporter, no colour codes in a piped log (cli/tune_console.py)
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
    if getattr(args, "rollout_staleness", None) is not None:
        cfg.training(rollout_staleness=args.rollout_staleness)
    if args.num_gpus_per_learner is not None:
        cfg.learners(num_gpus_per_learner=args.num_gpus_per_learner)
    warn_slow_dtype("opid-train", cfg.dtype, on_cpu=(cfg.num_gpus_per_learner or 0) <= 0)
    if getattr(args, "plan", False):  # before Ray starts
        from opid_rllib.memory_plan import print_config_plan

        return print_config_plan(cfg)
    num_samples = seed_trials(cfg, 1 if args.no_tune else args.num_samples)
    err = check_args(args) or _no_tune_error(cfg, args) or check_config(cfg) or _selection_error(cfg, args)
    if err:  # before Ray starts and before --output is created
        print(f"opid-train: error: {err}", file=sys.stderr)
        return 2
    set_progress_interval(cfg, args, num_samples)
    import ray
    from ray import tune

    from opid_rllib.quiet import quiet_ray_start

    output = os.path.abspath(args.output or os.path.join("outputs", "train"))
    os.makedirs(output, exist_ok=True)
    quiet_ray_start()
    # A caller's Ray session (a script or a test that runs several jobs in one) is joined and left running, as
    # tune.Tuner does; a session started here is shut down at the end.
    joined = ray.is_initialized()
    ctx = ray.init(num_cpus=args.num_cpus or None, ignore_reinit_error=True, include_dashboard=False)
    whose = "the caller's Ray session (joined)" if joined else "this session"
    print(f"[opid-train] Ray's logs for {whose}: {ray_session_dir(ctx)}", flush=True)
    try:
        if args.no_tune:
            return run_no_tune(cfg, args, output)
        reporter = status_reporter(args.tune_max_report_freq, with_eval=bool(args.eval_interval))
        tuner = tune.Tuner(
            "OPID", param_space=cfg,
            tune_config=tune.TuneConfig(num_samples=num_samples, scheduler=_scheduler(args)),
            run_config=tune.RunConfig(
                storage_path=output, name=tuner_name(cfg, args),
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
            print(f"trial {r.path}: success_rate={get_metric(r.metrics, 'opid/success_rate')}")
            if r.checkpoint:
                say_checkpoint(r.checkpoint.path)
        print_outputs(f"the Tune experiment {os.path.join(output, tuner_name(cfg, args))} (per trial: result.json, "
                      "progress.csv, TensorBoard events, checkpoints, skill dumps in opid_skills/)")
        keys = searched_keys(cfg)
        if keys:
            from opid_rllib.sweep_panel import write_selection

            by_eval = dict(metric=EVAL_METRIC, final_only=True) if args.eval_interval and not args.select_panel else {}
            write_selection(grid, keys, output, panel=args.select_panel,
                            episodes=args.select_episodes, max_steps=args.select_max_steps, **by_eval)
        return 1 if errors else 0
    finally:
        if not joined:
            ray.shutdown()


def set_progress_interval(cfg, args, num_samples: int) -> None:
    """--progress-every-s, else none in a sweep under Tune: Tune's table is its progress, and the heartbeats of many
    trials would interleave. A single run (Tune or --no-tune) keeps the config's (10 s)."""
    if getattr(args, "progress_every_s", None) is not None:
        cfg.progress_interval_s = max(0.0, args.progress_every_s)
    elif not args.no_tune and (num_samples > 1 or searched_keys(cfg)):
        cfg.progress_interval_s = 0


def _scheduler(args):
    """--asha-grace N: Tune's ASHA stops the trials whose evaluation success is in the bottom half at each rung.
    Until a trial's first evaluation its results have no evaluation/ key: ASHA waits for it, and Tune's strict
    metric check (which would stop the run on that first result) is turned off for this process."""
    if not args.asha_grace:
        return None
    from ray.tune.schedulers import ASHAScheduler

    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    return ASHAScheduler(metric=EVAL_METRIC, mode="max", time_attr="training_iteration",
                         grace_period=args.asha_grace, max_t=args.stop_iters)


def tuner_name(cfg, args) -> str:
    return f"{args.preset or 'opid'}-{cfg.env}"


def _no_tune_error(cfg, args) -> str | None:
    """--no-tune trains one config in this process: repeats and grids are Tune trials (it would run one, or fail
    inside RLlib on a grid)."""
    if not args.no_tune:
        return None
    if args.num_samples > 1:
        return f"--num-samples {args.num_samples}: the repeats are Tune trials; drop --no-tune"
    keys = searched_keys(cfg)
    if keys:
        return f"--no-tune: the config is a Tune grid over {', '.join(keys)}; drop --no-tune to run the sweep"
    return None


def _selection_error(cfg, args) -> str | None:
    from opid_rllib.sweep_panel import selection_args_error, selection_panel_error

    is_sweep = bool(set(searched_keys(cfg)) - set(REPEAT_KEYS))  # repeats alone (seeds) are nothing to pick among
    if getattr(args, "asha_grace", None) and not is_sweep:
        return "--asha-grace: stops the weaker trials of a sweep; a single run has none to compare"
    if getattr(args, "eval_interval", None) and is_sweep and not getattr(args, "select_panel", None):
        err = selection_panel_error(args.eval_panel, cfg.env)  # the sweep ranks on it: never the reported panel
        if err:
            return err.replace("--select-panel", "--eval-panel", 1)
    return selection_args_error(getattr(args, "select_panel", None), getattr(args, "select_episodes", None),
                                getattr(args, "select_max_steps", None), env=cfg.env, is_sweep=is_sweep)


if __name__ == "__main__":
    sys.exit(main())
