"""The self-teacher gap: does OPID's skill term have anything to distil on this model, env and analyzer?

OPID's skill term is the gradient of -KL(student || teacher), the teacher being the same policy with a hindsight
skill in its prompt. It can only help where that teacher plays better: a study of on-policy self-distillation
(He, Sieber and Saponati 2026, arXiv 2605.30070) finds the final gain linear in the initial student/teacher gap.
So before paying for a run, play the tasks twice with the training config's own pieces:

1. the student: plain prompts, the configured analyzer writing skills from each finished trajectory (as in
   training: the runner's analyzer pool);
2. the teacher: the same tasks and seeds, each step's prompt carrying the skill OPID's re-score would insert at that
   step of the student's trajectory (`routing.skill_routes`: critical-first by default, the same weights and slots).

Reported: both success rates and the gap in points; Delta = log pi(y | x + skill) - log pi(y | x) per token on the
student's own responses (what the re-score computes), on steps that followed the env's expert plan and on steps that
left it; and a one-line verdict. `headroom.py`'s oracle (the expert's next command at every step) is the ceiling.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import numpy as np

# Gap (points) from which the verdict says the term has something to distil; below it OPID should be expected to
# track GRPO or trail it (docs/LEARNING_GATE.md).
SIGNAL_POINTS = 10.0


def _play(runner, chunk: Sequence[str], *, temperature: float, seed: int, analyze: bool, routes=None):
    """One episode per task id, in task order; None where the task's env would not reset."""
    eps = runner.sample_groups(list(chunk), explore=False, analyze=analyze, group_size=1, temperature=temperature,
                               seed=seed, skill_routes=routes)
    got, out = iter(eps), []
    nxt = next(got, None)
    for tid in chunk:
        if nxt is not None and str(nxt.custom_data["opid"]["task_id"]) == str(tid):
            out.append(nxt)
            nxt = next(got, None)
        else:
            out.append(None)
    return out


def _routes(ep, routing: dict) -> list[tuple]:
    """(episode skill, step skill) per step of a student episode, routed as the learner's SkillPrompts routes them."""
    from opid_rllib.prompts.skills import route_trajectory, usable_skills

    if ep is None:
        return []
    s = usable_skills(ep.custom_data["opid"].get("skills"))
    if s is None:
        return [(None, None)] * len(ep)
    routes = route_trajectory(len(ep), s.episode_skill, s.step_skills, **routing)
    return [(s.episode_skill if r.use_episode else None, s.step_skills.get(t) if r.use_step else None)
            for t, r in enumerate(routes)]


def _deltas(module, ep, routes) -> list[dict[str, Any]]:
    """Per routed step of a student episode: the mean Delta per response token, the route and whether the step
    followed the expert's plan (None without a plan)."""
    from opid_rllib.prompts.skills import insert_skills, route_label

    prompts = ep.get_extra_model_outputs("prompt")
    resp = ep.get_extra_model_outputs("response_ids")
    lens = ep.get_extra_model_outputs("response_len")
    infos, actions = ep.get_infos(), ep.get_actions()
    rows = []
    for t, (episode_skill, step_skill) in enumerate(routes):
        label = route_label(episode_skill is not None, step_skill is not None)
        if label is None or int(lens[t]) == 0:
            continue
        plan = (infos[t] or {}).get("expert_actions") if t < len(infos) else None
        on_plan = None if not plan else " ".join(str(actions[t]).split()) == " ".join(str(plan[0]).split())
        rows.append({"t": t, "route": label, "on_plan": on_plan, "plain": prompts[t],
                     "skill": insert_skills(prompts[t], episode_skill=episode_skill, step_skill=step_skill),
                     "response": [int(x) for x in resp[t][: int(lens[t])]]})
    if not rows:
        return []
    ids, cut = module.encode_prompts([x for r in rows for x in (r["plain"], r["skill"])])
    scores = module.score(ids, [r["response"] for r in rows for _ in (0, 1)])
    out = []
    for k, r in enumerate(rows):
        if cut[2 * k] or cut[2 * k + 1]:
            continue  # a cut prompt measures more than the skill (as the re-score does, the row is left out)
        plain, skill = np.asarray(scores[2 * k], float), np.asarray(scores[2 * k + 1], float)
        out.append({"route": r["route"], "on_plan": r["on_plan"], "delta_per_token": float(np.mean(skill - plain)),
                    "tokens": int(len(plain))})
    return out


def _mean(rows, pred) -> dict[str, Any]:
    sel = [r for r in rows if pred(r)]
    toks = sum(r["tokens"] for r in sel)
    mean = sum(r["delta_per_token"] * r["tokens"] for r in sel) / toks if toks else None
    return {"steps": len(sel), "tokens": toks, "delta_per_token": None if mean is None else round(mean, 4)}


def verdict(gap_points: float, student_pct: float, teacher_pct: float) -> str:
    """The one line a user reads before training."""
    if gap_points >= SIGNAL_POINTS:
        return (f"the teacher is better by {gap_points:.1f} points ({teacher_pct:.1f} % against {student_pct:.1f} %): "
                "OPID's skill term has signal to distil")
    return (f"the teacher is not better ({gap_points:+.1f} points: {teacher_pct:.1f} % against {student_pct:.1f} %): "
            "OPID's skill term has little to distil here; expect OPID to track GRPO or fall behind it")


def measure_gap(config, task_ids: Sequence[str], *, temperature: float | None = None, seed: int = 0,
                batch_envs: int = 16, oracle: bool = False,
                log: Callable[[str], None] | None = print) -> dict[str, Any]:
    """Play `task_ids` (repeats allowed) as the student, analyse, play them again as the self-teacher.

    oracle: also play them a third time with the env expert's next command as the step skill at every step
    (`opid-eval --skills oracle`): the ceiling a perfect analyzer would give, reported as `oracle_success_pct`.

    config: an OPIDConfig as for training (model, env + env_config, analyzer and its options, skill routing and the
    two skill weights); temperature: default the config's training temperature (the gap that training sees).
    Runs in this process, without Ray. Returns the JSON-ready result (see the module doc)."""
    from opid_rllib.env_runner import GroupedTextEnvRunner

    if config.analyzer in (None, "none"):
        raise ValueError("measure_gap: analyzer='none' writes no skills; set the analyzer training would use "
                         "(e.g. 'hindsight', or 'openai' with its endpoint)")
    if config.episode_skill_adv_weight <= 0 and config.step_skill_adv_weight <= 0:
        raise ValueError("measure_gap: both skill weights are 0, so OPID routes no skill; set the weights training uses")
    temp = float(config.temperature if temperature is None else temperature)
    if not (temp > 0 and math.isfinite(temp)):
        raise ValueError(f"measure_gap: temperature={temperature}: must be > 0 (the training temperature)")
    if int(batch_envs) < 1 or not task_ids:
        raise ValueError("measure_gap: needs at least one task id and batch_envs >= 1")
    t0 = time.perf_counter()
    routing = {"mode": config.skill_routing, "w_ep": float(config.episode_skill_adv_weight),
               "w_step": float(config.step_skill_adv_weight)}
    runner = GroupedTextEnvRunner(config=config)
    student, teacher, ceiling, deltas, analysed, usable = [], [], [], [], 0, 0
    try:
        chunks = [list(task_ids[i:i + int(batch_envs)]) for i in range(0, len(task_ids), int(batch_envs))]
        for k, chunk in enumerate(chunks):
            eps = _play(runner, chunk, temperature=temp, seed=int(seed) + k, analyze=True)
            routes = [_routes(ep, routing) for ep in eps]
            for ep, r in zip(eps, routes):
                if ep is None:
                    continue
                analysed += ep.custom_data["opid"].get("skills") is not None
                usable += any(e is not None or st is not None for e, st in r)
                deltas.extend(_deltas(runner.module, ep, r))
            t_eps = _play(runner, chunk, temperature=temp, seed=int(seed) + k, analyze=False, routes=routes)
            student += [bool(ep is not None and ep.custom_data["opid"]["won"]) for ep in eps]
            teacher += [bool(ep is not None and ep.custom_data["opid"]["won"]) for ep in t_eps]
            if oracle:
                from opid_rllib.play import play_tasks

                ceiling += [bool(r["won"]) for r in play_tasks(runner, chunk, temperature=temp, seed=int(seed) + k,
                                                               batch_envs=len(chunk), progress=False,
                                                               skills="oracle")]
            if log:
                log(f"[gap] chunk {k + 1}/{len(chunks)}: student {100 * np.mean(student):.1f} %, teacher "
                    f"{100 * np.mean(teacher):.1f} % over {len(student)} episodes, {time.perf_counter() - t0:.0f}s")
    finally:
        runner.stop()
    s_pct, t_pct = 100.0 * float(np.mean(student)), 100.0 * float(np.mean(teacher))
    gap = round(t_pct - s_pct, 2)
    return {
        "episodes": len(student), "temperature": temp, "seed": int(seed),
        "student_success_pct": round(s_pct, 2), "teacher_success_pct": round(t_pct, 2), "gap_points": gap,
        "analysed_trajectories": int(analysed), "trajectories_with_routed_skills": int(usable),
        "delta": {"on_plan": _mean(deltas, lambda r: r["on_plan"] is True),
                  "off_plan": _mean(deltas, lambda r: r["on_plan"] is False),
                  "episode_skill": _mean(deltas, lambda r: r["route"] == "episode"),
                  "step_skill": _mean(deltas, lambda r: r["route"] == "step"),
                  "all": _mean(deltas, lambda r: True)},
        "routing": dict(routing, analyzer=config.analyzer, analyzer_config=dict(config.analyzer_config or {})),
        "verdict": verdict(gap, s_pct, t_pct),
        "seconds": round(time.perf_counter() - t0, 1),
    } | ({"oracle_success_pct": round(100.0 * float(np.mean(ceiling)), 2)} if oracle else {})
