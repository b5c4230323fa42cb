"""The per-iteration skill dumps (opid_skills/iter_XXXXX.jsonl): writing them during training and
reading them for the skill browser, side by side so the two cannot drift.

Writing takes the `routed` column from the learner's own output (CombineAdvantages' opid/trained_routes: the
routes after truncated skill prompts and non-finite re-scores were dropped), so it is what was trained.
Reading: whatever a dump line holds, the
browser gets the fields it reads with types it can rely on; an unreadable line is skipped and counted.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from opid_rllib.advantages import plan_match
from opid_rllib.report.runs import SKILL_DIR, read_json_lines

_ITER_FILE = re.compile(r"^iter_(\d+)\.jsonl$")


# ---- writing (training side) ----------------------------------------------------------------------
def skill_dump_record(ep, *, iteration: int, routed: list | None,
                      teacher_diagnostics: dict | None = None) -> dict[str, Any]:
    """One trajectory: task, actions, the analysis, each step's trained route (`routed`: the learner's labels;
    None: it reached no learner, so no step was routed) and whether it followed the expert plan (null: no plan),
    and the iteration's Delta-by-plan teacher diagnostics."""
    m = ep.custom_data["opid"]
    skills = m.get("skills") or {}
    actions = [str(a) for a in ep.get_actions()]
    infos = ep.get_infos()
    on_plan = [plan_match(a, (infos[i] or {}).get("expert_actions")) for i, a in enumerate(actions)]
    return {"iteration": iteration, "traj_id": m["traj_id"], "task_id": m["task_id"], "task": m["task"],
            "task_type": m["task_type"], "won": m["won"], "actions": actions, "skills": skills,
            "routed": list(routed) if routed is not None else [None] * len(ep),
            "on_plan": [None if p != p else bool(p) for p in on_plan],
            "teacher_diagnostics": dict(teacher_diagnostics or {})}


def teacher_diagnostics(peek) -> dict:
    """This iteration's Delta-by-plan metrics (CombineAdvantages) and teacher-sample ones (TeacherSamples), for the
    dump: `peek(group, key)` reads the learner's opid/ metrics (None when absent)."""
    out = {}
    plan = ("on_plan_token_mean", "off_plan_token_mean", "off_plan_neg_frac", "on_plan_steps", "off_plan_steps")
    keys = [(f"delta_{kind}", k) for kind in ("ep", "step") for k in plan]
    keys += [("teacher_samples", k) for k in ("rows", "delta_token_mean", "on_plan_frac", "student_on_plan_frac")]
    for group, k in keys:
        try:  # peek's default does not cover a missing intermediate key (searchqa has no plan)
            v = peek(group, k)
        except KeyError:
            v = None
        if v is not None:
            out[f"{group}/{k}"] = float(v)
    return out


def write_skill_dump(run_dir: os.PathLike | str, episodes, *, iteration: int, routes: dict[str, list],
                     teacher_diagnostics: dict | None = None) -> Path:
    """<run_dir>/opid_skills/iter_XXXXX.jsonl, one line per trajectory; `routes`: {traj_id: labels} as trained."""
    path = Path(run_dir) / SKILL_DIR / f"iter_{iteration:05d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for ep in episodes:
            routed = routes.get(ep.custom_data["opid"]["traj_id"])
            f.write(json.dumps(skill_dump_record(ep, iteration=iteration, routed=routed,
                                                 teacher_diagnostics=teacher_diagnostics)) + "\n")
    return path


# ---- reading (report side) ------------------------------------------------------------------------


def load_skill_dumps(run_dir: os.PathLike | str, last_iters: int | None = None
                     ) -> tuple[list[dict[str, Any]], list[str]]:
    """All trajectories of opid_skills/iter_*.jsonl (oldest iteration first), warnings."""
    d = Path(run_dir) / SKILL_DIR
    warnings: list[str] = []
    if not d.is_dir():
        return [], warnings
    files = sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _ITER_FILE.match(p.name)))
    if last_iters:
        files = files[-last_iters:]
    trajs: list[dict[str, Any]] = []
    bad = 0
    for it, p in files:
        recs, n_bad = read_json_lines(p)
        bad += n_bad + sum(not isinstance(rec, dict) for rec in recs)
        trajs += [_normalize_traj(rec, it) for rec in recs if isinstance(rec, dict)]
    if bad:
        warnings.append(f"{SKILL_DIR}: skipped {bad} unreadable line(s)")
    return trajs, warnings


def _normalize_traj(rec: dict[str, Any], file_iter: int) -> dict[str, Any]:
    """The fields the browser reads, with types it can rely on (whatever the dump holds)."""
    skills = rec.get("skills") if isinstance(rec.get("skills"), dict) else {}
    skills = dict(skills)
    steps = skills.get("step_skills")
    skills["step_skills"] = {str(k): v for k, v in steps.items()} if isinstance(steps, dict) else {}
    actions = rec.get("actions") if isinstance(rec.get("actions"), list) else []
    routed = rec.get("routed") if isinstance(rec.get("routed"), list) else []
    on_plan = rec.get("on_plan") if isinstance(rec.get("on_plan"), list) else []
    diag = rec.get("teacher_diagnostics") if isinstance(rec.get("teacher_diagnostics"), dict) else {}
    it = rec.get("iteration")
    won = rec.get("won")
    return {
        "iteration": it if isinstance(it, int) and not isinstance(it, bool) else file_iter,
        "traj_id": "" if rec.get("traj_id") is None else str(rec.get("traj_id")),
        "task_id": "" if rec.get("task_id") is None else str(rec.get("task_id")),
        "task": "" if rec.get("task") is None else str(rec.get("task")),
        "task_type": "" if rec.get("task_type") is None else str(rec.get("task_type")),
        "won": bool(won) if isinstance(won, (bool, int, float)) else None,
        "actions": ["" if a is None else str(a) for a in actions],
        "routed": [r if isinstance(r, str) and r else None for r in routed],
        "on_plan": [v if isinstance(v, bool) else None for v in on_plan],
        "teacher_diagnostics": {str(k): float(v) for k, v in diag.items()
                                if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v},
        "skills": skills,
    }


