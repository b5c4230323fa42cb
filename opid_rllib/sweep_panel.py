"""Score a finished sweep's points on a *selection* panel (e.g. ALFWorld `valid_seen`), not on training success.

Why: a policy that rarely wins scores 0 on every point's training batches, so training success cannot tell the
points apart (`sweep_select` reports the tie). Playing each trial's final policy on a held-out selection panel
gives every point a score of its own. The env's main panel (the one results are reported on, e.g.
`alfworld/valid_unseen@v1`) is refused: selection never sees the numbers the study reports.
A trial whose evaluation fails is left unscored (and says why); it never stops the other points.
"""

from __future__ import annotations

import os
from typing import Any

# The trial config's rollout settings the selection panel is played with (the policy's own prompt layout).
_LLM_SETTINGS = ("history_length", "max_prompt_len", "max_new_tokens", "dtype", "generation_backend")


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


def score_trial(trial: dict, config: dict, panel: str, *, episodes: int | None = None,
                max_steps: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Export the trial's final checkpoint to a HF folder beside it and play the panel once (no skills).

    Returns {"panel", "episodes", "table"} or {"panel", "error"}; the trial's `history` becomes [All %] (or []).
    """
    from opid_rllib.eval.panel import evaluate
    from opid_rllib.export import export_checkpoint

    ckpt = trial.get("checkpoint")
    if not ckpt:
        trial["history"] = []
        return {"panel": panel, "error": "the trial left no checkpoint (did it fail?)"}
    settings = {k: config[k] for k in _LLM_SETTINGS if config.get(k) is not None}
    try:
        policy = export_checkpoint(ckpt, os.path.join(trial["path"], "selection_policy"))
        res = evaluate(panel=panel, episodes=episodes, seed=seed, progress=False,
                       temperature=config.get("eval_temperature"), llm_model=str(policy), max_steps=max_steps,
                       **settings)
    except Exception as e:  # noqa: BLE001 - one point's failure leaves it unscored, the sweep goes on
        trial["history"] = []
        return {"panel": panel, "error": f"{type(e).__name__}: {e}"[:500]}
    table = res["table"]
    trial["history"] = [table["success_pct"]["All"]]
    return {"panel": panel, "episodes": table["n"]["All"], "table": table["success_pct"]}
