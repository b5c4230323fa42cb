"""The skill slots of a per-step prompt (what OPID's teacher re-scoring edits), and which slot a step fills.

Why here: the env runner's prompt and the learner's skill-augmented prompt must differ ONLY by
the inserted sections, so the teacher log-prob difference measures the skill and nothing else.
Episode skill: right after the task line (the agent reads it together with the goal).
Step skill: right before the final format paragraph ("Now it's your turn ..."), i.e. after the
history, the current observation and the action list.

Routing (reference notes section 3): per step t of a usably analysed trajectory, with s_t = step_skills.get(t, ""):
    critical_first (the reference's "step_priority", default):
        use_step    = s_t non-empty and w_step > 0
        use_episode = has_episode_skill and w_ep > 0 and not use_step
        -> at most one skill per sample: step skill at critical steps, episode skill elsewhere.
    additive:     episode and step decided independently; both deltas are added.
    episode_only: episode skill only.
    step_only:    step skill only.
A trajectory without a usable analysis (`usable_skills`) routes nothing: plain GRPO signal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional

# Every template ends with a paragraph starting with this anchor (prompts/_common.py builds them); the
# critical-step skill goes right before it.
TURN_ANCHOR = "Now it's your turn"
ROUTING_MODES = ("critical_first", "additive", "episode_only", "step_only")

# Lines that state the goal, in priority order of appearance (the FIRST matching line wins).
TASK_LINE_PATTERNS = (
    re.compile(r"Your task is to:"),
    re.compile(r"Your task is:"),
    re.compile(r"Your current task is:"),
    re.compile(r"Your question:"),
)
STEP_ANCHOR = TURN_ANCHOR  # "Now it's your turn"

EPISODE_TITLE = "**Episode-Level Skill**"
EPISODE_INSTRUCTION = ("Consult this episode-level skill, learned from earlier attempts at tasks like "
                       "this one, whenever you choose an action in the current episode:")
STEP_TITLE = "**Critical-Step Skill**"
STEP_INSTRUCTION = "Apply this critical-step skill to the decision at the current step only:"


def episode_section(skill: str) -> str:
    return f"{EPISODE_TITLE}\n{EPISODE_INSTRUCTION}\n[{str(skill).strip()}]"


def step_section(skill: str) -> str:
    return f"{STEP_TITLE}\n{STEP_INSTRUCTION}\n[{str(skill).strip()}]"


def _task_line_end(prompt: str) -> int | None:
    """Offset just after the first line holding a task-line pattern, or None."""
    pos = 0
    for line in prompt.splitlines(keepends=True):
        if any(p.search(line) for p in TASK_LINE_PATTERNS):
            return pos + len(line.rstrip("\n"))
        pos += len(line)
    return None


def _insert_at(prompt: str, offset: int, section: str) -> str:
    """Put `section` at `offset` as its own block, separated by exactly one blank line each side."""
    head, tail = prompt[:offset].rstrip("\n"), prompt[offset:].lstrip("\n")
    parts = [p for p in (head, section, tail) if p]
    return "\n\n".join(parts)


def insert_skills(prompt: str, *, episode_skill: str | None = None, step_skill: str | None = None) -> str:
    """Return `prompt` with the episode and/or step skill sections inserted; unchanged if both None.

    Empty / whitespace-only skills count as None (an empty [] section is noise, not a skill).
    Fallbacks: no task line -> episode section goes before "Now it's your turn", and without that
    anchor either, both sections are appended at the end.
    """
    episode_skill = episode_skill if episode_skill and str(episode_skill).strip() else None
    step_skill = step_skill if step_skill and str(step_skill).strip() else None
    if episode_skill is None and step_skill is None:
        return prompt
    anchor = prompt.find(STEP_ANCHOR)
    anchor = anchor if anchor >= 0 else len(prompt)
    inserts = []  # (offset in the ORIGINAL prompt, order, section); later offsets applied first
    if episode_skill is not None:
        end = _task_line_end(prompt)
        inserts.append((anchor if end is None else end, 0, episode_section(episode_skill)))
    if step_skill is not None:
        inserts.append((anchor, 1, step_section(step_skill)))
    out = prompt
    for offset, _, section in sorted(inserts, reverse=True):
        out = _insert_at(out, offset, section)
    return out


# ---- which skill a step gets ------------------------------------------------------------------------------
class UsableSkills(NamedTuple):
    episode_skill: str
    step_skills: dict[int, str]


def usable_skills(skills: Any) -> Optional[UsableSkills]:
    """The one rule for "is this analysis usable for teacher signals?" (no error and a non-empty episode skill,
    as `analyzer.base.Skills.ok`), for a Skills object or the dict form episodes carry; None when it is not."""
    if not skills:
        return None
    get = skills.get if isinstance(skills, Mapping) else (lambda k: getattr(skills, k, None))
    episode = str(get("episode_skill") or "")
    if get("error") is not None or not episode.strip():
        return None
    return UsableSkills(episode, {int(k): str(v) for k, v in (get("step_skills") or {}).items()})


@dataclass(frozen=True)
class Route:
    use_episode: bool
    use_step: bool


def route(step_skill: Optional[str], *, has_episode_skill: bool, mode: str, w_ep: float, w_step: float) -> Route:
    if mode not in ROUTING_MODES:
        raise ValueError(f"skill_routing must be one of {ROUTING_MODES}, got {mode!r}")
    # A step skill counts only if it has text (None / "" / whitespace = no skill at this step).
    step_possible = bool(step_skill and step_skill.strip()) and w_step > 0
    episode_possible = bool(has_episode_skill) and w_ep > 0
    if mode == "critical_first":
        return Route(use_episode=episode_possible and not step_possible, use_step=step_possible)
    if mode == "additive":
        return Route(use_episode=episode_possible, use_step=step_possible)
    if mode == "episode_only":
        return Route(use_episode=episode_possible, use_step=False)
    return Route(use_episode=False, use_step=step_possible)  # step_only


def route_trajectory(num_steps: int, episode_skill: Optional[str], step_skills: Mapping[int, str], *, mode: str,
                     w_ep: float, w_step: float) -> list[Route]:
    """Route every step t = 0..num_steps-1 of one trajectory."""
    has_episode_skill = bool(episode_skill and episode_skill.strip())
    step_skills = step_skills or {}
    return [route(step_skills.get(t), has_episode_skill=has_episode_skill, mode=mode, w_ep=w_ep, w_step=w_step)
            for t in range(num_steps)]


def route_label(use_episode: bool, use_step: bool) -> Optional[str]:
    """"episode", "step", "episode+step" or None (the skill dumps' `routed` column)."""
    return "+".join(n for n, on in (("episode", use_episode), ("step", use_step)) if on) or None
