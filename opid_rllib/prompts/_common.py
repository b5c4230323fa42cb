"""Pieces shared by the per-env templates (history window, action lists, the format paragraph).

Why shared: ALFWorld and WebShop prompts differ only in wording; keeping the history and the
action-list formatting in one place keeps the three envs' prompts structurally identical, which
is what the skill-slot anchors in skills.py rely on.
"""

from __future__ import annotations

from typing import Sequence

# Every template ends with a paragraph starting with this anchor; skills.py inserts the critical-step skill
# right before it (and defines it, so the skill slots need nothing else of the templates).
from opid_rllib.prompts.skills import TURN_ANCHOR

ENV_NAMES = ("alfworld", "webshop", "searchqa", "signpost")


def canonical_env_name(env_name: str) -> str:
    """'alfworld', 'ALFWorld', 'opid/alfworld-v0' ... -> 'alfworld'."""
    low = str(env_name).lower()
    for name in ENV_NAMES:
        if name in low:
            return name
    if "search" in low:
        return "searchqa"
    raise ValueError(f"env_name={env_name!r}: no prompt template; known: {', '.join(ENV_NAMES)}")



THINK_ACTION_INSTRUCTION = (
    TURN_ANCHOR + " to take an action. First reason step by step about the current situation and "
    "what your goal still needs; this reasoning MUST be written inside <think> </think> tags. "
    "Then choose exactly one {kind} action for this step and write it inside <action> </action> tags."
)


def history_window(history: Sequence[tuple[str, str]], history_length: int) -> list[tuple[int, str, str]]:
    """The last `history_length` (obs, action) pairs with their 1-based step numbers.

    history_length <= 0 means the prompt shows no history at all.
    """
    if history_length <= 0 or not history:
        return []
    start = max(0, len(history) - history_length)
    return [(start + i + 1, str(o), str(a)) for i, (o, a) in enumerate(history[start:])]


def format_history(window: list[tuple[int, str, str]]) -> str:
    """One line per past step: [Observation k: '...', Action k: '...']."""
    return "\n".join(f"[Observation {k}: '{o.strip()}', Action {k}: '{a.strip()}']" for k, o, a in window)


def format_actions(admissible: Sequence[str] | None) -> str:
    """Quoted, comma-separated, in brackets; 'help' is dropped because it only prints a manual."""
    items = [str(a) for a in (admissible or []) if str(a).strip().lower() != "help"]
    return "[" + ", ".join(f"'{a}'" for a in items) + "]"


def history_intro(n: int) -> str:
    """Lead-in sentence of the (observation, action) window, grammatical for n == 1."""
    if n == 1:
        return "Here are the last observation and the action you took:"
    return f"Here are the last {n} observations and the actions you took:"


def steps_phrase(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"
