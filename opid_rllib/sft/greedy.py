"""Greedy success of a policy on given task ids, played by the training env runner.

Why not a loop of its own: the warm start is only useful if the policy does well on the prompts,
encoding and projection RL uses, so this plays through `opid_rllib.play.play_tasks` on a
GroupedTextEnvRunner (the path `opid-eval` takes) with an ad-hoc panel of the given tasks, and adds
the SFT-specific rate: agreement with the env expert's next command.
"""

from __future__ import annotations

from typing import Any, Iterable

from opid_rllib.paper_table import expert_agreement


def evaluate_greedy(model_path, env_name: str, task_ids: Iterable[str], *, history_length: int, max_steps: int,
                    max_prompt_len: int = 2048, max_new_tokens: int = 96, split: str = "train",
                    env_kwargs: dict | None = None, enable_thinking: bool = False, batch_size: int = 32,
                    seed: int = 0) -> dict[str, Any]:
    """Greedy rates of the policy at `model_path` (one episode per task): success, format validity,
    expert agreement, mean steps, plus per-task outcomes in `won` and the runner's `records`."""
    import envs as envs_pkg
    from envs.panels import Panel
    from opid_rllib.eval.panel import evaluate

    name = envs_pkg.env_name_of(env_name)
    ids = tuple(str(t) for t in task_ids)
    panel = Panel(name=f"{name}/{split}:{len(ids)}-tasks", env=name, split=split, task_ids=ids,
                  env_kwargs=dict(env_kwargs or {}))
    res = evaluate(panel=panel, llm_model=str(model_path), temperature=0.0, seed=seed, batch_envs=int(batch_size),
                   progress=False, history_length=int(history_length), max_steps=int(max_steps),
                   max_prompt_len=int(max_prompt_len), max_new_tokens=int(max_new_tokens),
                   enable_thinking=bool(enable_thinking))
    recs = res["episodes"]
    n, c = max(1, len(recs)), res["counts"]
    return {"episodes": len(recs), "success_rate": c["won"] / n,
            "format_valid_rate": c["format_valid_steps"] / max(1, c["steps"]),
            "expert_agreement": expert_agreement(name, recs) or 0.0, "mean_steps": c["steps"] / n,
            "seconds": res["timing"]["rollout_s"], "won": {r["task_id"]: r["won"] for r in recs}, "records": recs}
