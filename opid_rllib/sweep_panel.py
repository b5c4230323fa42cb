"""Choose a finished sweep's point into OUTPUT/sweep.json: by training success (`sweep_select`), or by each
point's final policy on a *selection* panel (e.g. ALFWorld `valid_seen`).

Why a panel: a policy that rarely wins scores 0 on every point's training batches, so training success cannot tell the
points apart (`sweep_select` reports the tie). Playing each trial's final policy on a held-out selection panel
gives every point a score of its own. The env's main panel (the one results are reported on, e.g.
`alfworld/valid_unseen@v1`) is refused: selection never sees the numbers the study reports.
A trial whose evaluation fails is left unscored (and says why); it never stops the other points.
"""

from __future__ import annotations

import json
import os
from typing import Any

# The trial config's rollout settings the selection panel is played with (the policy's own prompt layout).
_LLM_SETTINGS = ("history_length", "max_prompt_len", "max_new_tokens", "dtype", "generation_backend")


def selection_args_error(panel: str | None, episodes: int | None, max_steps: int | None, *, is_sweep: bool,
                         env: str) -> str | None:
    """One-line error for --select-* flags that cannot work: sizes without a panel, a panel without a grid,
    or a panel that cannot select for `env`."""
    if not panel:
        for flag, v in (("--select-episodes", episodes), ("--select-max-steps", max_steps)):
            if v is not None:
                return f"{flag}: sizes the --select-panel play; give --select-panel too"
        return None
    if not is_sweep:
        return "--select-panel: only for a sweep (a config with tune.grid_search); a single run has nothing to select"
    return selection_panel_error(panel, env)


def selection_panel_error(panel: str, env: str) -> str | None:
    """One-line error for a panel that cannot select for `env` (unknown, another env's, or the main panel)."""
    from opid_rllib.eval.panel import MAIN_PANELS, EvalError, load_panel

    from envs import env_name_of

    try:
        name = load_panel(panel, env).name
    except (EvalError, ValueError) as e:
        return str(e).replace("--panel", "--select-panel", 1)
    if name == MAIN_PANELS.get(env_name_of(env)):
        return (f"--select-panel {name}: that is the panel results are reported on; select on a held-out panel "
                f"(e.g. alfworld/valid_seen@v1) so the selection never sees the reported numbers")
    return None


def metric_name(panel: str) -> str:
    return f"{panel} success % (All)"


def play_settings(config: dict) -> dict:
    """evaluate() kwargs a trial's policy is played with: its rollout settings (the policy's own prompt layout),
    its eval temperature, and its env settings (e.g. {"expert": "sweep"}) without its training split and step cap."""
    return {**{k: config[k] for k in _LLM_SETTINGS if config.get(k) is not None},
            "temperature": config.get("eval_temperature"),
            "env_kwargs": {k: v for k, v in (config.get("env_config") or {}).items()
                           if k not in ("split", "max_steps")}}


def score_trial(trial: dict, config: dict, panel: str, *, episodes: int | None = None,
                max_steps: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Export the trial's final checkpoint to a HF folder beside it and play the panel once (no skills).

    Returns {"panel", "episodes", "table", "expert_agreement_pct", "env_config"} (what was played) or {"panel",
    "error"}; the trial's `history` becomes [All %] (or []).
    """
    from opid_rllib.eval.panel import evaluate
    from opid_rllib.export import export_checkpoint

    ckpt = trial.get("checkpoint")
    if not ckpt:
        trial["history"] = []
        return {"panel": panel, "error": "the trial left no checkpoint (did it fail?)"}
    try:
        policy = export_checkpoint(ckpt, os.path.join(trial["path"], "selection_policy"))
        res = evaluate(panel=panel, episodes=episodes, seed=seed, progress=False, llm_model=str(policy),
                       max_steps=max_steps, **play_settings(config))
    except Exception as e:  # noqa: BLE001 - one point's failure leaves it unscored, the sweep goes on
        trial["history"] = []
        return {"panel": panel, "error": f"{type(e).__name__}: {e}"[:500]}
    table = res["table"]
    trial["history"] = [table["success_pct"]["All"]]
    # agreement with the env expert's next command: a drift off the plan shows there before it shows in wins
    return {"panel": panel, "episodes": table["n"]["All"], "table": table["success_pct"],
            "expert_agreement_pct": table.get("expert_agreement_pct"), "env_config": res["config"]["env_config"]}


def write_selection(grid, searched: list[str], output: str, *, panel: str | None = None, episodes: int | None = None,
                    max_steps: int | None = None, metric: str = "opid/success_rate", final_only: bool = False) -> dict:
    """Rank a Tune ResultGrid's points into OUTPUT/sweep.json: by `metric` (mean over iterations; its last value
    with `final_only`, e.g. the final evaluation/success_rate), or with a panel by each final policy's success there
    (training curves kept as `training_history`). A tie is a tie."""
    from opid_rllib.sweep_select import rank_trials, ranking_text

    trials = []
    for r in grid:
        df = r.metrics_dataframe
        history = [] if df is None or metric not in df else [float(v) for v in df[metric].dropna()]
        history = history[-1:] if final_only else history
        trials.append({"params": {k: (r.config or {}).get(k) for k in searched}, "history": history,
                       "path": r.path, "checkpoint": r.checkpoint.path if r.checkpoint else None})
    if panel:
        for t, r in zip(trials, grid):
            t["training_history"] = t["history"]
            t["selection"] = score_trial(t, r.config or {}, panel, episodes=episodes, max_steps=max_steps)
            got = t["selection"]
            agree = got.get("expert_agreement_pct")
            print(f"selection panel {panel}: {t['params']} -> {got.get('table', got)}"
                  + ("" if agree is None else f", agreement with the expert {agree:.1f} %"))
        sel = rank_trials(trials, metric_name(panel), scope="final policy on the selection panel")
    else:
        sel = rank_trials(trials, metric, scope="final evaluation" if final_only else "mean over iterations")
    sel["trials"] = trials
    path = os.path.join(output, "sweep.json")
    with open(path, "w") as f:
        json.dump(sel, f, indent=1, default=str)
    print(ranking_text(sel))
    print(f"wrote {path}")
    return sel
