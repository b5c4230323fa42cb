"""The skill slots of a per-step prompt (what OPID's teacher re-scoring edits).

Why here: the env runner's prompt and the learner's skill-augmented prompt must differ ONLY by
the inserted sections, so the teacher log-prob difference measures the skill and nothing else.
Episode skill: right after the task line (the agent reads it together with the goal).
Step skill: right before the final format paragraph ("Now it's your turn ..."), i.e. after the
history, the current observation and the action list.
"""

from __future__ import annotations

import re

from opid_rllib.prompts._common import TURN_ANCHOR

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
