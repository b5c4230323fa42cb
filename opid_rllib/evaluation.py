"""Validation during training, the RLlib way: `config.evaluation(evaluation_interval=N)` plays a panel, no skills.

Why its own module: the reference validates every `test_freq` iterations on the validation split at the eval
temperature, and RLlib users expect that under `config.evaluation(...)` with `evaluation/...` in every result,
in TensorBoard and as a Tune metric. RLlib's own evaluation samples `evaluation_duration` episodes through
`EnvRunner.sample()`, which for OPID means training-style groups with the analyzer in the loop; this module
instead plays what `opid-eval` plays, with the same loop (opid_rllib/play.py), so the two give the same numbers.

What is played (OPIDConfig settings, settings.OPID_DEFAULTS):
  eval_panel       a name of envs.panels (e.g. "alfworld/valid_unseen@v1"): its split, its games in order;
  eval_task_ids    or an explicit list of task ids of the evaluation env's split;
                   neither: the evaluation env's own task list (its split; evaluation_config may change it);
  evaluation_duration (RLlib's, unit "episodes"): how many of those (a panel's in turn from each task type, as
                   opid-eval --episodes plays them; a list's from the first); every one when it is larger than the list;
  eval_seed, eval_batch_envs: opid-eval's --seed and --batch-envs (chunk k of eval_batch_envs games samples with
                   seed eval_seed + k, wherever it runs, so the result does not depend on the number of runners);
  eval_fresh_seeds: the evaluation after iteration i starts at seed eval_seed + i * (number of chunks) instead;
  eval_temperature: the sampling temperature (0.4 in the reference).
Where: RLlib's remote evaluation runners (`evaluation_num_env_runners` > 0), else the training runners on envs of
the evaluation split (GroupedTextEnvRunner.play_on): no second model in the driver. Each play puts its process's
random generators back, so evaluation never changes the training streams.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Mapping, Sequence

from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_LEN_MEAN, EPISODE_RETURN_MEAN, NUM_EPISODES


def eval_panel(cfg):
    """The config's eval_panel as a Panel object (None when it names none)."""
    if not cfg.eval_panel:
        return None
    from envs.panels import get_panel

    return get_panel(cfg.eval_panel)


def evaluation_errors(cfg) -> list[str]:
    """What is wrong with the evaluation settings, one line each (config_checks adds them to the config's)."""
    errors = []
    if cfg.eval_panel is not None:
        from envs import env_name_of
        from envs.panels import list_panels

        try:
            panel = eval_panel(cfg)
        except KeyError:
            return [f"eval_panel={cfg.eval_panel!r}: unknown panel; use one of {list_panels()}"]
        try:
            env = env_name_of(cfg.env)
        except ValueError:
            env = cfg.env
        if panel.env != env:
            errors.append(f"eval_panel={cfg.eval_panel!r}: a {panel.env} panel, but env is {env!r}; pick one of "
                          f"{[p for p in list_panels() if p.startswith(f'{env}/')]}")
        if not panel.task_ids:
            errors.append(f"eval_panel={cfg.eval_panel!r}: the panel has no task ids (its {panel.env} data is not "
                          "built yet); build the env's data or pick another panel")
        if cfg.eval_task_ids is not None:
            errors.append("eval_task_ids: eval_panel already names the games; set one of them")
    # (a value of the wrong type is named once, by config_checks' type check)
    if isinstance(cfg.eval_task_ids, list) and not (cfg.eval_task_ids and all(isinstance(t, str)
                                                                              for t in cfg.eval_task_ids)):
        errors.append(f"eval_task_ids={cfg.eval_task_ids!r}: must be None or a non-empty list of task id strings")
    if isinstance(cfg.eval_seed, int) and cfg.eval_seed < 0:
        errors.append(f"eval_seed={cfg.eval_seed!r}: must be an int >= 0")
    if isinstance(cfg.eval_batch_envs, int) and cfg.eval_batch_envs < 1:
        errors.append(f"eval_batch_envs={cfg.eval_batch_envs!r}: must be an int >= 1 (games played side by side)")
    if cfg.eval_final_iteration is not None and not cfg.evaluation_interval:
        errors.append(f"eval_final_iteration={cfg.eval_final_iteration}: evaluation is off; set "
                      "config.evaluation(evaluation_interval=N) as well")
    if cfg.evaluation_interval and cfg.custom_evaluation_function is None:
        if cfg.evaluation_duration == "auto" or cfg.evaluation_duration_unit != "episodes":
            errors.append(f"evaluation_duration={cfg.evaluation_duration!r} ({cfg.evaluation_duration_unit}): OPID "
                          "evaluates whole games; set evaluation_duration=N, evaluation_duration_unit='episodes'")
    return errors


def evaluation_env_config(cfg) -> dict[str, Any]:
    """The evaluation runners' env_config: the training one, then the panel's split and settings (as opid-eval's
    build_eval_config), with the config's step cap."""
    env_config = dict(cfg.env_config)
    panel = eval_panel(cfg)
    if panel is not None:
        env_config.update(panel.env_kwargs)
        env_config["split"] = panel.split
    env_config["max_steps"] = int(cfg.max_steps)
    return env_config


def apply_to_evaluation_config(eval_cfg) -> None:
    """Turn RLlib's evaluation config object into opid-eval's deployment setting: the panel's env, no analyzer,
    no skills in the prompt (OPIDConfig.get_evaluation_config_object calls this). RLlib's evaluation group never
    gets a runner in the driver (no second model there): its remote runners play, or with none asked for the
    training runners do (GroupedTextEnvRunner.play_on)."""
    eval_cfg.env_config = evaluation_env_config(eval_cfg)
    eval_cfg.analyzer = "none"
    eval_cfg.skills_in_rollout_prompt = False
    eval_cfg.create_local_env_runner = False
    # learner-side terms that need an analyzer's skills: nothing here learns, and validate would refuse them
    eval_cfg.teacher_sample_adv_weight = eval_cfg.teacher_sample_sft_coeff = eval_cfg.teacher_anchor_coeff = 0.0


def eval_task_list(cfg, runner=None) -> list[str]:
    """The task ids one evaluation plays, in order: the panel's, eval_task_ids, or the eval env's own list."""
    panel = eval_panel(cfg)
    if panel is not None:
        ids = list(panel.task_ids)
    elif cfg.eval_task_ids is not None:
        ids = list(cfg.eval_task_ids)
    else:
        ids = list(runner._make_env(0).task_ids())
    n = cfg.evaluation_duration if isinstance(cfg.evaluation_duration, int) else len(ids)
    if panel is not None:  # opid-eval --episodes n's games, so the two give the same numbers
        from envs.panels import spread_over_types

        return spread_over_types(ids, n)
    return ids[:n]


def _play_chunks(runner, chunks: Sequence[tuple[int, list[str]]], seed: int, temperature: float, batch_envs: int,
                 env_config: Mapping[str, Any] | None) -> list[tuple[int, list[dict]]]:
    """Play numbered chunks on one runner, in whatever process it lives; chunk k samples with seed + k, as in one
    opid-eval play. The process's random generators are put back afterwards and the runner's counters drained, so
    a training runner goes on with its own streams and metrics."""
    from opid_rllib import process_rng
    from opid_rllib.play import play_tasks

    state = process_rng.capture()
    scope = runner.play_on(env_config) if env_config is not None else contextlib.nullcontext()
    try:
        with scope:
            return [(k, play_tasks(runner, chunk, temperature=temperature, seed=seed + k, batch_envs=batch_envs,
                                   progress=False)) for k, chunk in chunks]
    finally:
        process_rng.restore(state)
        runner.get_metrics()  # the evaluation's own counters never reach the training results


def play_evaluation(group, cfg, env_config: Mapping[str, Any] | None = None,
                    iteration: int = 0) -> tuple[list[dict], float]:
    """Play one evaluation on an EnvRunnerGroup (its remote runners, else its local one); (records in task order,
    seconds). `env_config`: the training runners play on envs built from it (their training envs are kept).
    `iteration`: the training iteration it follows (the seeds' offset with eval_fresh_seeds)."""
    t0 = time.perf_counter()
    n_remote = group.num_remote_env_runners()
    runner = group.local_env_runner

    def tasks_of(r):
        with r.play_on(env_config) if env_config is not None else contextlib.nullcontext():
            return eval_task_list(cfg, r)

    if cfg.eval_panel or cfg.eval_task_ids is not None:
        tasks = eval_task_list(cfg)  # named by the config: no runner needed
    elif n_remote == 0:
        tasks = tasks_of(runner)
    else:  # the eval env's own task list, asked of a remote runner
        tasks = group.foreach_env_runner(tasks_of, local_env_runner=False)[0]
    b = int(cfg.eval_batch_envs)
    chunks = [(k, tasks[i:i + b]) for k, i in enumerate(range(0, len(tasks), b))]
    seed = int(cfg.eval_seed) + (iteration * len(chunks) if cfg.eval_fresh_seeds else 0)
    args = (seed, float(cfg.eval_temperature), b, None if env_config is None else dict(env_config))
    if n_remote == 0:
        played = _play_chunks(runner, chunks, *args)
    else:
        shares = [chunks[i::n_remote] for i in range(n_remote)]
        funcs = [(lambda r, s=s: _play_chunks(r, s, *args)) for s in shares]
        played = [c for res in group.foreach_env_runner(funcs, local_env_runner=False) for c in res]
    records = [r for _, recs in sorted(played, key=lambda c: c[0]) for r in recs]
    return records, time.perf_counter() - t0


def run_evaluation(algo) -> tuple[dict[str, Any], list[dict]]:
    """One evaluation of an OPID algorithm (OPID.evaluate): on RLlib's remote evaluation runners, synced from the
    learner first, else on the training runners (synced by the training step) with envs of the evaluation split;
    RLlib's on_evaluate_start/end callbacks around it. Returns (the evaluation/ results, the episode records)."""
    from ray.rllib.callbacks.utils import make_callback

    from envs import env_name_of

    cfg = algo.evaluation_config
    group = algo.eval_env_runner_group
    if group is not None and group.num_remote_env_runners():
        group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)
        env_config = None  # RLlib's evaluation runners, built on the evaluation env
    else:
        group, env_config = algo.env_runner_group, cfg.env_config
        if algo.config.rollout_staleness > 0 and group.num_remote_env_runners():
            # pipelined: the runners hold the weights of their last batch, not the learner's (pipeline.py)
            group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)
    make_callback("on_evaluate_start", callbacks_objects=algo.callbacks,
                  callbacks_functions=algo.config.callbacks_on_evaluate_start,
                  kwargs=dict(algorithm=algo, metrics_logger=algo.metrics))
    records, wall_s = play_evaluation(group, cfg, env_config, iteration=algo.iteration + 1)
    try:
        env = env_name_of(cfg.env)
    except ValueError:  # a user-registered gymnasium id: the table groups by task type
        env = str(cfg.env)
    results = evaluation_metrics(records, env, temperature=cfg.eval_temperature, wall_s=wall_s, panel=cfg.eval_panel)
    results["evaluated_at_iteration"] = algo.iteration + 1
    make_callback("on_evaluate_end", callbacks_objects=algo.callbacks,
                  callbacks_functions=algo.config.callbacks_on_evaluate_end,
                  kwargs=dict(algorithm=algo, metrics_logger=algo.metrics, evaluation_metrics=results))
    return results, records


def evaluation_metrics(records: Sequence[Mapping[str, Any]], env: str, *, temperature: float, wall_s: float,
                       panel: str | None = None) -> dict[str, Any]:
    """The `evaluation/...` results of one play (pure): opid-eval's table as numbers plus RLlib's own episode keys
    (`evaluation/env_runners/episode_return_mean` is what RLlib's tuned examples stop on)."""
    from opid_rllib.paper_table import summarize

    table = summarize(records, env)
    n = len(records)
    out: dict[str, Any] = {
        "success_rate": table["success_pct"]["All"] / 100.0 if n else math.nan,
        "success_pct": {c: v for c, v in table["success_pct"].items() if v is not None},
        "mean_episode_length": table["mean_episode_length"],
        "format_valid_pct": table["format_valid_pct"],
        "episodes": n,
        "env_errors": sum(bool(r.get("env_error")) for r in records),
        "temperature": float(temperature),
        "wall_s": round(float(wall_s), 3),
        ENV_RUNNER_RESULTS: {
            EPISODE_RETURN_MEAN: sum(float(r["reward"]) for r in records) / n if n else math.nan,
            EPISODE_LEN_MEAN: table["mean_episode_length"],
            NUM_EPISODES: n,
        },
    }
    for key in ("expert_agreement_pct", "mean_score"):
        if key in table:
            out[key] = table[key]
    if panel is not None:
        out["panel"] = panel
    return {k: v for k, v in out.items() if v is not None}
