"""Evaluate a policy on a fixed panel in the deployment setting: no analyzer, no skills.

Why its own module (and no Ray): evaluation is "play these exact games with this checkpoint and
report the paper's table". It builds an `OPIDConfig` + a `GroupedTextEnvRunner` in-process and
calls `sample_groups(..., explore=False, analyze=False, group_size=1)` on the panel's task ids in
chunks of `batch_envs`, so prompts, projection and the step cap are exactly the training rollout's.

Determinism: chunk k is sampled with generation seed `seed + k` (the runner then seeds every
generation step), so a fixed (model, panel, episodes, seed, batch_envs, settings) gives identical
per-episode actions. Temperature 0 means greedy decoding.

Playing is opid_rllib/play.py (also used by `opid-sft`'s greedy check); the table
(opid_rllib/paper_table.py) follows the reference's eval script: success % per ALFWorld
category, their macro average "Avg", overall success "All", format-valid rate, episode length.

    from opid_rllib.eval.panel import evaluate, write_results
    from opid_rllib.paper_table import format_table
    res = evaluate(panel="alfworld/valid_unseen@v1", llm_model="tiny", episodes=20, temperature=0.4)
    print(format_table(res)); write_results(res, "outputs/eval/my-run")
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from opid_rllib.eval.chunk_log import ChunkLog
from opid_rllib.play import play_tasks
from opid_rllib.paper_table import summarize
from opid_rllib.models.fingerprint import weights_fingerprint

ENV_NAMES = ("alfworld", "webshop", "searchqa")


# Reference settings per env when a caller does not give them (opid_reference.md section 7):
# ALFWorld 30 steps / history 5, WebShop 15 / 2, search-QA 4 turns (history shows all of them).
# Each env's main evaluation panel (the paper's table): opid-eval's default, never a sweep's selection panel.
MAIN_PANELS = {"alfworld": "alfworld/valid_unseen@v1", "webshop": "webshop/test@v1", "searchqa": "searchqa/test@v1"}
ENV_DEFAULTS = {"alfworld": {"max_steps": 30, "history_length": 5},
                "webshop": {"max_steps": 15, "history_length": 2},
                "searchqa": {"max_steps": 4, "history_length": 4}}

# Keyword arguments of `evaluate` that go to OPIDConfig.llm (the rest of the config stays default).
LLM_KEYS = ("llm_model", "dtype", "generation_backend", "backend_kwargs", "max_new_tokens", "max_prompt_len",
            "history_length", "max_steps", "eval_temperature", "top_p", "enable_thinking")


class EvalError(ValueError):
    """A user-facing setup error; the message is one line naming the flag and the fix."""


# ---- setup ------------------------------------------------------------------------------------
def load_panel(panel, env: str | None = None):
    """Panel object from a name (or a Panel), checked against `env`; EvalError names the flag."""
    from envs.panels import Panel, get_panel, list_panels

    if not isinstance(panel, Panel):
        name = str(panel)
        try:
            panel = get_panel(name)
        except KeyError:
            raise EvalError(f"--panel {name!r}: unknown panel; use one of {list_panels()}") from None
    if env is not None:
        try:
            from envs import env_name_of

            env = env_name_of(env)
        except ValueError:
            raise EvalError(f"--env {env!r}: unknown env; use one of {list(ENV_NAMES)}") from None
        if env != panel.env:
            same = [p for p in list_panels() if p.startswith(env + "/")]
            raise EvalError(f"--panel {panel.name!r} is a {panel.env!r} panel but --env is {env!r}; "
                            f"pass --env {panel.env} or a {env} panel ({same})")
    if not panel.task_ids:
        raise EvalError(f"--panel {panel.name!r}: the panel has no task ids (its {panel.env} task data is not "
                        f"built/installed yet); pick another panel or build the {panel.env} data first")
    return panel


def _one_line(e: BaseException, limit: int = 300) -> str:
    msg = " ".join(f"{type(e).__name__}: {e}".split())
    return msg if len(msg) <= limit else msg[:limit] + "..."


def preflight_env(panel, env_config: Mapping[str, Any]) -> None:
    """Build the env and reset the panel's first task, so a broken env fails in a second, not after
    the model loads (the runner counts reset failures as lost episodes and keeps going)."""
    import envs

    try:
        env = envs.make(panel.env, **dict(env_config))
    except Exception as e:  # noqa: BLE001 - reported as one line naming the flag
        raise EvalError(f"--env {panel.env}: building the env with {dict(env_config)} failed ({_one_line(e)}); "
                        "fix the env install/data or pick another panel") from None
    try:
        env.reset(options={"task_id": panel.task_ids[0]})
    except Exception as e:  # noqa: BLE001
        raise EvalError(f"--panel {panel.name!r}: the {panel.env} env cannot reset the panel's first task "
                        f"{panel.task_ids[0]!r} ({_one_line(e)}); the env's task data does not match the panel: "
                        "rebuild the env data or pick another panel") from None
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001
            pass


def looks_like_path(spec: str) -> bool:
    """A folder, not a hub id ("org/name"): starts with . / ~, ends with a slash, or has two or more of them.
    Why: `--model policy/` before `opid-export` wrote it was reported as a hub id missing from the HF cache."""
    s = str(spec)
    return s.startswith((".", "/", "~")) or s.endswith("/") or s.count("/") >= 2


def resolve_model_path(spec: str) -> Path:
    """resolve_model with errors turned into one line that names --model."""
    from opid_rllib.models import ModelResolutionError, resolve_model

    s = str(spec)
    local = Path(s).expanduser()
    if looks_like_path(s) and not local.exists():
        raise EvalError(f"--model {s!r}: no such path; pass an existing Hugging Face model folder "
                        "(config.json + weights + tokenizer), 'tiny' or 'smollm2-135m'")
    try:
        return resolve_model(s)
    except ModelResolutionError as e:
        raise EvalError(f"--model {s!r}: {' '.join(str(e).split())}") from None


def build_eval_config(config=None, *, panel, env_kwargs: Mapping[str, Any] | None = None, **llm_kwargs):
    """OPIDConfig for deployment-setting eval: the panel's env + split, analyzer off, no skills.

    `config` may be an OPIDConfig (copied, its llm settings kept), a dict of llm settings, or None;
    `llm_kwargs` (keys of LLM_KEYS, `model` as an alias of `llm_model`) override either. `env_kwargs`
    are added to the panel's (e.g. ALFWorld's expert="sweep": whose next command the oracle names).
    """
    from opid_rllib.algorithm import OPIDConfig

    if isinstance(config, Mapping):
        llm_kwargs = {**dict(config), **llm_kwargs}
        config = None
    if "model" in llm_kwargs:
        llm_kwargs["llm_model"] = llm_kwargs.pop("model")
    unknown = sorted(set(llm_kwargs) - set(LLM_KEYS))
    if unknown:
        raise TypeError(f"evaluate(): unknown settings {unknown}; known: {list(LLM_KEYS)}")
    cfg = copy.deepcopy(config) if config is not None else OPIDConfig()
    defaults = ENV_DEFAULTS.get(panel.env, {})
    settings = {k: v for k, v in llm_kwargs.items() if v is not None}
    if config is None:  # a fresh config: the env's reference step cap and history
        for k, v in defaults.items():
            settings.setdefault(k, v)
    cfg.llm(**settings)
    cfg.analyzer_settings(analyzer="none", skills_in_rollout_prompt=False)
    for key in ("split", "max_steps"):
        if key in (env_kwargs or {}):
            raise EvalError(f"--env-kwargs {key!r}: set by the panel / --max-steps, not here")
    env_config = {**dict(panel.env_kwargs), **dict(env_kwargs or {})}
    env_config["split"] = panel.split
    env_config["max_steps"] = int(cfg.max_steps)
    cfg.environment(panel.env, env_config=env_config)
    return cfg


# ---- the entry point --------------------------------------------------------------------------
def evaluate(config=None, *, panel, episodes: int | None = None, seed: int = 0, batch_envs: int = 16,
             progress: bool = True, temperature: float | None = None, env: str | None = None,
             skills: str = "none", env_kwargs: Mapping[str, Any] | None = None,
             oracle_options: Mapping[str, Any] | None = None,
             chunk_log: str | os.PathLike | None = None, resume: bool = False, **llm_kwargs) -> dict[str, Any]:
    """Play the panel's task ids once each (`episodes` of them if given, in turn from each task type:
    envs.panels.spread_over_types); return the results dict.

    config: an OPIDConfig, a dict of llm settings, or None; llm_kwargs (llm_model/model, max_new_tokens,
    max_steps, history_length, max_prompt_len, dtype, generation_backend, ...) override it.
    temperature: sampling temperature (0 -> greedy); default the config's eval_temperature.
    Returns {"config", "counts", "table", "timing", "episodes"}; `episodes` holds the per-episode
    records (write_results puts them in episodes.jsonl and the rest in results.json).
    skills="oracle" also plays the panel as the skill teacher (same seed; the step skill naming the
    env's expert next action at every step) and adds "teacher_table", "headroom" (teacher - student,
    points per column) and "teacher_episodes". oracle_options: the wording of that step skill, as the hindsight
    analyzer's options (only quote_sampled, default True: "X instead of 'Y'."; False: "X.").
    chunk_log: a JSONL file that keeps each finished chunk of games (chunk_log.py); with resume=True the chunks
    it holds from this same play (same weights, panel, settings and seed) are read back instead of played, so a
    play cut short goes on from its next chunk with the records it would have had. Without resume it starts empty.
    """
    t_start = time.perf_counter()
    started = _dt.datetime.now(_dt.timezone.utc)
    if episodes is not None and int(episodes) < 1:
        raise EvalError(f"--episodes {episodes}: must be >= 1 (omit it to play the whole panel)")
    if int(batch_envs) < 1:
        raise EvalError(f"--batch-envs {batch_envs}: must be >= 1")
    if skills not in ("none", "oracle"):
        raise EvalError(f"--skills {skills}: must be 'none' or 'oracle'")
    oracle_quote = _oracle_quote_sampled(oracle_options, skills)
    if temperature is not None and (float(temperature) < 0 or not math.isfinite(float(temperature))):
        raise EvalError(f"--temperature {temperature}: must be >= 0 (0 = greedy)")
    for flag, key in (("--max-new-tokens", "max_new_tokens"), ("--max-steps", "max_steps")):
        if llm_kwargs.get(key) is not None and int(llm_kwargs[key]) < 1:
            raise EvalError(f"{flag} {llm_kwargs[key]}: must be >= 1")
    if llm_kwargs.get("history_length") is not None and int(llm_kwargs["history_length"]) < 0:
        raise EvalError(f"--history-length {llm_kwargs['history_length']}: must be >= 0")
    panel = load_panel(panel, env)
    task_ids = list(panel.task_ids)
    requested = episodes
    if episodes is not None and int(episodes) > len(task_ids):
        print(f"opid-eval: --episodes {episodes} > panel size {len(task_ids)}: playing all {len(task_ids)}",
              file=sys.stderr)
    if episodes is not None and int(episodes) < len(task_ids):
        from envs.panels import spread_note, spread_over_types

        task_ids = spread_over_types(task_ids, int(episodes))
        if progress:  # say which games a subset is
            print(f"opid-eval: {spread_note(task_ids, len(panel.task_ids))}", file=sys.stderr)

    cfg = build_eval_config(config, panel=panel, env_kwargs=env_kwargs, **llm_kwargs)
    preflight_env(panel, cfg.env_config)
    model_spec = str(cfg.llm_model)
    model_path = resolve_model_path(model_spec)
    cfg.llm(llm_model=str(model_path))
    temp = float(cfg.eval_temperature if temperature is None else temperature)
    cfg.llm(eval_temperature=temp)
    if not oracle_quote:  # read by the runner's oracle pass; the analyzer stays off
        cfg.experimental(hindsight_options={"quote_sampled": False})
    try:
        cfg.validate()
    except ValueError as e:
        raise EvalError(" ".join(str(e).split())) from None

    from opid_rllib.env_runner import GroupedTextEnvRunner

    fingerprint = weights_fingerprint(str(model_path))  # which weights played, wherever they lay
    play = {"weights": fingerprint, "panel_sha256": panel.sha256, "task_ids": task_ids, "seed": int(seed),
            "temperature": temp, "batch_envs": int(batch_envs), "env_config": dict(cfg.env_config),
            "llm": {k: getattr(cfg, k) for k in ("max_new_tokens", "max_prompt_len", "max_steps", "history_length",
                                                 "top_p", "dtype", "generation_backend", "enable_thinking")}}
    if chunk_log is not None and not resume and os.path.exists(chunk_log):
        os.remove(chunk_log)
    roles = {"student": {}, "teacher": {} if oracle_quote else {"oracle_quote_sampled": False}}
    logs = {role: None if chunk_log is None else ChunkLog(chunk_log, dict(play, role=role, **extra))
            for role, extra in roles.items()}
    runner = GroupedTextEnvRunner(config=cfg)
    t_loaded = time.perf_counter()
    try:
        records = play_tasks(runner, task_ids, temperature=temp, seed=seed, batch_envs=int(batch_envs),
                             progress=progress, desc=panel.name, chunk_log=logs["student"])
        t_done = time.perf_counter()
        teacher = None
        if skills == "oracle":
            if not any(r.get("expert_next") for r in records):
                raise EvalError(f"--skills oracle: env {panel.env!r} gives no expert plan "
                                "(info['expert_actions']) on this panel; the oracle evaluation needs one")
            teacher = play_tasks(runner, task_ids, temperature=temp, seed=seed, batch_envs=int(batch_envs),
                                 progress=progress, desc=f"{panel.name} (teacher)", skills="oracle",
                                 chunk_log=logs["teacher"])
    finally:
        runner.stop()
    t_teacher = time.perf_counter()
    failed = sum(bool(r.get("reset_failed")) for r in records)
    if failed:
        print(f"opid-eval: warning: {failed} of {len(records)} episodes failed to reset their env twice; "
              "they count as lost (see reset_failed in episodes.jsonl)", file=sys.stderr)

    steps = sum(r["length"] for r in records)
    rollout_s = t_done - t_loaded
    played = steps - (logs["student"].resumed_steps if chunk_log is not None else 0)  # steps this call played
    results = {
        "config": {
            "model": model_spec,
            "model_path": str(model_path),
            "model_weights": fingerprint,
            "panel": panel.name,
            "panel_sha256": panel.sha256,
            "panel_size": len(panel.task_ids),
            "env": panel.env,
            "split": panel.split,
            "env_config": dict(cfg.env_config),
            "episodes_requested": requested,
            "seed": int(seed),
            "temperature": temp,
            "greedy": temp <= 0,
            "batch_envs": int(batch_envs),
            "max_new_tokens": int(cfg.max_new_tokens),
            "max_prompt_len": int(cfg.max_prompt_len),
            "max_steps": int(cfg.max_steps),
            "history_length": int(cfg.history_length),
            "top_p": float(cfg.top_p),
            "dtype": cfg.dtype,
            "generation_backend": cfg.generation_backend,
            "enable_thinking": bool(cfg.enable_thinking),
            "analyzer": "none",
            "skills": skills,
            **({"oracle_quote_sampled": oracle_quote} if skills == "oracle" else {}),
        },
        "counts": {
            "episodes": len(records),
            "won": sum(bool(r["won"]) for r in records),
            "steps": steps,
            "format_valid_steps": sum(sum(r["format_valid"]) for r in records),
            "env_errors": sum(bool(r["env_error"]) for r in records),
            "reset_failures": sum(bool(r.get("reset_failed")) for r in records),
            "prompt_truncations": sum(r["prompt_truncated"] for r in records),
        },
        "table": summarize(records, panel.env),
        "timing": {
            "started_at": started.isoformat(timespec="seconds"),
            "wall_s": round(time.perf_counter() - t_start, 3),
            "load_s": round(t_loaded - t_start, 3),
            "rollout_s": round(rollout_s, 3),
            "steps_per_s": round(played / rollout_s, 3) if rollout_s > 0 and played > 0 else None,
        },
        "versions": _versions(),
        "episodes": records,
    }
    if teacher is not None:
        from opid_rllib.eval.headroom import headroom

        results["teacher_table"] = summarize(teacher, panel.env)
        results["headroom"] = headroom(results["table"], results["teacher_table"])
        results["timing"]["teacher_rollout_s"] = round(t_teacher - t_done, 3)
        results["teacher_episodes"] = teacher
    if chunk_log is not None:  # what a resumed play read back instead of playing (its timing covers the rest)
        roles = [role for role in logs if role == "student" or teacher is not None]
        results["timing"]["resumed_episodes"] = {role: logs[role].resumed_episodes for role in roles}
        results["timing"]["resumed_play_s"] = {role: round(logs[role].resumed_s, 3) for role in roles}
    return results


def _oracle_quote_sampled(options: Mapping[str, Any] | None, skills: str) -> bool:
    """The oracle step skill's wording from --analyzer-option: whether it quotes the sampled command."""
    options = dict(options or {})
    if options and skills != "oracle":
        raise EvalError(f"--analyzer-option {', '.join(sorted(options))}: sets the oracle step skill's wording; "
                        "add --skills oracle (a plain play uses no analyzer)")
    unknown = sorted(set(options) - {"quote_sampled"})
    if unknown:
        raise EvalError(f"--analyzer-option {', '.join(unknown)}: the oracle reads only quote_sampled (its step "
                        "skill's wording); other analyzer options shape training's skills: give them to opid-train")
    from opid_rllib.analyzer.hindsight import HindsightAnalyzer

    try:  # the analyzer checks its own option, as opid-train's config validation has it do
        return HindsightAnalyzer(**options).quote_sampled
    except ValueError as e:
        raise EvalError(f"--analyzer-option {e}") from None


def _versions() -> dict[str, str]:
    out = {}
    for mod in ("opid_rllib", "torch", "transformers", "ray"):
        try:
            out[mod] = str(getattr(__import__(mod), "__version__", "?"))
        except Exception:  # noqa: BLE001 - versions are informational
            out[mod] = "?"
    return out


def default_output_dir(panel_name: str, root: str | os.PathLike = "outputs/eval") -> Path:
    """./outputs/eval/<panel-name-sanitized>-<UTC timestamp>, made unique if it exists."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', panel_name).strip('_')}-{stamp}"
    out, i = base, 1
    while out.exists():
        out, i = Path(f"{base}-{i}"), i + 1
    return out


# (results key, file name, role) of the episode records write_results writes and read_plays reads.
EPISODE_FILES = (("episodes", "episodes.jsonl", "student"), ("teacher_episodes", "teacher_episodes.jsonl", "teacher"))


def write_results(results: Mapping[str, Any], out_dir: str | os.PathLike) -> Path:
    """DIR/results.json (everything but the episodes) and DIR/episodes.jsonl (one line per episode)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = {k: v for k, v in results.items() if k not in {key for key, _, _ in EPISODE_FILES}}
    (out / "results.json").write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
    for key, name, _ in EPISODE_FILES:
        if key in results:
            with open(out / name, "w") as f:
                for r in results[key]:
                    f.write(json.dumps(r) + "\n")
    return out


def read_episodes(path: str | os.PathLike) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_plays(out_dir: str | os.PathLike) -> dict[str, list[dict[str, Any]]]:
    """The episode records an opid-eval --output DIR holds, by role: "student", and "teacher" after --skills oracle."""
    return {role: read_episodes(Path(out_dir) / name) for _, name, role in EPISODE_FILES
            if (Path(out_dir) / name).exists()}


__all__: Iterable[str] = ("evaluate", "write_results", "read_plays", "play_tasks", "load_panel", "build_eval_config",
                          "default_output_dir", "EvalError")
