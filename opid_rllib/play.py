"""Play task ids with a built GroupedTextEnvRunner and turn its episodes into JSON records.

Why apart from the panel setup (eval/panel.py): this is the one rollout loop for every evaluation
(opid-eval, in-training eval, the SFT warm start's greedy check), so prompts, encoding, projection
and the step cap are always the training runner's.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Mapping, Sequence

from opid_rllib.progress import LineBar


def episode_record(ep, task_id: str | None = None) -> dict[str, Any]:
    """One line of episodes.jsonl from a finished SingleAgentEpisode of the runner."""
    meta = ep.custom_data.get("opid", {})
    infos = ep.get_infos()
    final = infos[-1] if len(infos) else {}
    rec = {
        "task_id": str(meta.get("task_id", task_id)),
        "task": meta.get("task", ""),
        "task_type": meta.get("task_type", ""),
        "won": bool(meta.get("won", False)),
        "length": int(len(ep)),
        "reward": float(sum(ep.get_rewards())) if len(ep) else 0.0,
        "actions": [str(a) for a in ep.get_actions()],
        "responses": [str(t) for t in ep.get_extra_model_outputs("response_text")] if len(ep) else [],
        "format_valid": [bool(v) for v in ep.get_extra_model_outputs("format_valid")] if len(ep) else [],
        "prompt_truncated": int(sum(bool(v) for v in ep.get_extra_model_outputs("prompt_truncated")))
        if len(ep) else 0,
        "env_error": bool(meta.get("env_error", False)),
    }
    if isinstance(final, Mapping) and final.get("score") is not None:
        rec["score"] = float(final["score"])
    # The env expert's next command before each step (None where it had no plan): lets a caller
    # measure agreement with the expert (the SFT warm start's check) without replaying the env.
    plans = [(i.get("expert_actions") or [None])[0] if isinstance(i, Mapping) else None
             for i in list(infos)[:len(ep)]]
    if any(p is not None for p in plans):
        rec["expert_next"] = [None if p is None else str(p) for p in plans]
    return rec


def _reset_failed_record(task_id: str) -> dict[str, Any]:
    # The runner drops a task whose env failed to reset twice; it still counts as a lost episode.
    return {"task_id": str(task_id), "task": "", "task_type": "", "won": False, "length": 0, "reward": 0.0,
            "actions": [], "responses": [], "format_valid": [], "prompt_truncated": 0, "env_error": True,
            "reset_failed": True}


def play_tasks(runner, task_ids: Sequence[str], *, temperature: float, seed: int = 0, batch_envs: int = 16,
               progress: bool = True, desc: str = "eval", skills: str = "none",
               on_chunk: Callable[[list, list], None] | None = None, chunk_log=None) -> list[dict[str, Any]]:
    """Play every task id once (greedy if temperature <= 0) with a built runner; records in task order.

    skills="oracle": the skill teacher plays (the expert's next action as a step skill at every step,
    GroupedTextEnvRunner.sample_groups); "none": the plain policy, as deployed. on_chunk, if given, is called
    as on_chunk(chunk task ids, the runner's finished SingleAgentEpisodes of it), e.g. to keep their prompts
    and infos. chunk_log (a `ChunkLog`, chunk_log.py): chunks it holds are read back instead of played, and each
    chunk played is added to it, so a play cut short goes on from its next chunk (not with on_chunk, which needs the
    episodes themselves).

    Works with any GroupedTextEnvRunner, e.g. an algorithm's local env runner for in-training eval.
    The bar advances per finished episode (seen at the next generation step); its postfix shows the step. Where
    stderr is not a terminal it is a line every 10 s (progress.LineBar), so a log or a pipe shows it as it goes.
    """
    from tqdm.auto import tqdm

    if chunk_log is not None and on_chunk is not None:
        raise ValueError("play_tasks: chunk_log reads chunks back as records, on_chunk needs their episodes")
    records: list[dict[str, Any]] = []
    n_chunks = max(1, math.ceil(len(task_ids) / batch_envs))
    if progress and not sys.stderr.isatty():  # a log file or a pipe: whole lines, not carriage-return redraws
        bar = LineBar(len(task_ids), desc)
    else:
        bar = tqdm(total=len(task_ids), desc=desc, unit="ep", disable=not progress, file=sys.stderr,
                   dynamic_ncols=True)
    max_steps = int(getattr(runner, "settings", {}).get("max_steps") or 0)
    state = {"chunk": 0, "step": 0, "size": 0, "ended": 0}

    def status() -> str:
        won = sum(r["won"] for r in records)
        succ = f"success {100.0 * won / len(records):.1f}%, " if records else ""
        return f"{succ}chunk {state['chunk'] + 1}/{n_chunks} step {state['step']}"

    module = getattr(runner, "module", None)
    wrapped = progress and module is not None and "generate" not in vars(module)
    if wrapped:  # per-step progress: the runner has no step hook, so count its generate calls
        class_generate = module.generate

        def generate(prompt_ids, *args, **kwargs):
            state["step"] += 1
            ended = state["size"] - len(prompt_ids)  # the chunk's episodes that ended: the bar moves per episode
            if ended > state["ended"]:
                bar.update(ended - state["ended"])
                state["ended"] = ended
            if hasattr(bar, "fraction") and max_steps:  # a LineBar: pace = chunks done + this one's step of the cap
                bar.fraction = (state["chunk"] + min(1.0, state["step"] / max_steps)) / n_chunks
            bar.set_postfix_str(f"{status()} ({len(prompt_ids)} live)")
            return class_generate(prompt_ids, *args, **kwargs)

        module.generate = generate
    try:
        for k, start in enumerate(range(0, len(task_ids), batch_envs)):
            chunk = [str(t) for t in task_ids[start:start + batch_envs]]
            state.update(chunk=k, step=0, size=len(chunk), ended=0)
            kept = None if chunk_log is None else chunk_log.get(k, chunk)
            if kept is not None:
                records.extend(kept)
                bar.update(len(chunk))
                continue
            n_before, t_chunk = len(records), time.perf_counter()
            eps = runner.sample_groups(chunk, explore=False, analyze=False, group_size=1,
                                       temperature=float(temperature), seed=int(seed) + k, skills=skills)
            if on_chunk is not None:
                on_chunk(chunk, eps)
            got = iter(eps)
            nxt = next(got, None)
            for tid in chunk:  # episodes come back in task order, minus tasks whose reset failed
                if nxt is not None and str(nxt.custom_data["opid"]["task_id"]) == tid:
                    records.append(episode_record(nxt, tid))
                    nxt = next(got, None)
                else:
                    records.append(_reset_failed_record(tid))
            if chunk_log is not None:
                records[n_before:] = chunk_log.add(k, chunk, records[n_before:], time.perf_counter() - t_chunk)
            bar.set_postfix_str(status())
            bar.update(len(chunk) - state["ended"])
            state["ended"] = len(chunk)
    finally:
        if wrapped:
            del module.generate  # back to the class method
        bar.close()
    return records


