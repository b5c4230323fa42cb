"""Skill prompts: route each trajectory's usable analysis (critical-first by default), insert, tokenize.

One skill per augmented prompt, as the reference does: the episode skill after the task line,
the step skill before the final instruction (prompts/skills.py); additive routing builds both
prompts and re-scores them separately. A failed or missing analysis routes nothing, so those
rows keep the plain GRPO signal (counted in `opid/analysis_failed_trajectories`).

A skill prompt cut by max_prompt_len (left truncation drops the task line, not only the skill) would
measure more than the skill: that row is not routed (plain GRPO signal) and is counted in
opid/teacher_prompt_truncations. The route decided here is final but for a re-score that comes back
non-finite (CombineAdvantages drops that row's term and reports the routes trained).
"""

from __future__ import annotations

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.samples import SAMPLES, StepSamples, log, policy_module
from opid_rllib.prompts.skills import insert_skills, route_trajectory


class SkillPrompts(ConnectorV2):
    def __init__(self, *args, skill_routing: str, episode_skill_adv_weight: float, step_skill_adv_weight: float,
                 **kw):
        super().__init__(*args, **kw)
        self.mode, self.w_ep, self.w_step = skill_routing, float(episode_skill_adv_weight), float(step_skill_adv_weight)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t: StepSamples = shared_data[SAMPLES]
        n = len(t)
        t.episode_skill, t.step_skill = [None] * n, [None] * n
        critical = np.zeros(n, bool)
        for traj in t.trajectories.values():
            if traj.skills is None:
                continue
            s = traj.skills
            rows = range(n)[traj.rows]
            routes = route_trajectory(len(rows), s.episode_skill, s.step_skills, mode=self.mode, w_ep=self.w_ep,
                                      w_step=self.w_step)
            for step, (i, r) in enumerate(zip(rows, routes)):
                t.episode_skill[i] = s.episode_skill if r.use_episode else None
                t.step_skill[i] = s.step_skills.get(step) if r.use_step else None
                critical[i] = step in s.step_skills
        module = policy_module(rl_module)
        cut = 0
        for kind in ("episode", "step"):
            texts = getattr(t, f"{kind}_skill")
            ids, cut_rows = _encode(module, {i: insert_skills(t.prompt[i], **{f"{kind}_skill": s})
                                             for i, s in enumerate(texts) if s is not None})
            for i in cut_rows:
                texts[i] = None  # q = 0 for that row: no teacher term, no teacher statistics
            setattr(t, "prompt_ep" if kind == "episode" else "prompt_step", [ids.get(i) for i in range(n)])
            cut += len(cut_rows)
        log(metrics, "teacher_prompt_truncations", cut)
        analysed = [tr for tr in t.trajectories.values() if tr.analysed]
        log(metrics, "analysis_trajectories", len(analysed))
        log(metrics, "analysis_failed_trajectories", sum(tr.skills is None for tr in analysed))
        log(metrics, "skill_step_ratio", float(np.mean(critical)) if n else 0.0)
        log(metrics, "routed_episode_ratio", t.use_episode.sum() / max(n, 1))
        log(metrics, "routed_step_ratio", t.use_step.sum() / max(n, 1))
        return batch


def _encode(module, prompts: dict[int, str]) -> tuple[dict[int, list[int]], list[int]]:
    """Token ids of the skill prompts that fit max_prompt_len, by row; the rows whose prompt was cut."""
    if not prompts:
        return {}, []
    rows = list(prompts)
    ids, cut = module.encode_prompts([prompts[i] for i in rows])
    return {i: x for i, x, c in zip(rows, ids, cut) if not c}, [i for i, c in zip(rows, cut) if c]
