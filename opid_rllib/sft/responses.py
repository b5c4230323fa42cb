"""Target responses of the warm-start demos, and when two commands are the same.

Why apart from the demo collection (demos.py): the response format is what the projection accepts, and the
SFT greedy check (greedy.py) compares commands the same way the collection does.
"""

from __future__ import annotations

import re

from opid_rllib.prompts import canonical_env_name
from opid_rllib.prompts.commands import command_key, same_action, searchqa_block  # noqa: F401 (re-exported)
from opid_rllib.prompts.projection import _CJK

MAX_THINK_TASK_WORDS = 10
_TAGS = re.compile(r"</?(think|action|search|answer|information)>", re.IGNORECASE)


def _clean(text: str) -> str:
    """One line, no agent tags, angle brackets or CJK characters (the projection rejects those)."""
    text = _CJK.sub(" ", _TAGS.sub(" ", str(text)))
    return " ".join(text.replace("<", " ").replace(">", " ").split())


def _short_task(task: str, max_words: int = MAX_THINK_TASK_WORDS) -> str:
    words = _clean(task).rstrip(" .").split()
    if not words:
        return "finish the task"
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


RESPONSE_STYLES = ("reasoned", "action")


def expert_response(env_name: str, *, task: str, action: str, style: str = "reasoned") -> str:
    """The target response for one expert step. "reasoned": short deterministic reasoning + the
    command; "action": an empty think block + the command (ALFWorld/WebShop; still format-valid under
    the verl-agent projection), a third of the tokens to generate, for small models whose "reasoning"
    only restates the task (searchqa keeps its reasoning: the block kind is the decision there)."""
    env = canonical_env_name(env_name)
    if style not in RESPONSE_STYLES:
        raise ValueError(f"response_style={style!r}: must be one of {RESPONSE_STYLES}")
    cmd = " ".join(str(action).split())
    if env != "searchqa" and style == "action":
        return f"<think></think>\n<action>{cmd}</action>"
    goal = _short_task(task)
    if env == "searchqa":
        kind, inner = searchqa_block(action)
        if kind == "search":
            think = f"Question: {goal} ; I still miss facts, next: search for {_clean(inner)}."
        else:
            think = f"Question: {goal} ; I have enough information, the answer is {_clean(inner)}."
        return f"<think>{think}</think>\n<{kind}>{inner}</{kind}>"
    return f"<think>Goal: {goal} ; next: {_clean(cmd)}.</think>\n<action>{cmd}</action>"


def checked_response(env_name: str, *, task: str, action: str, style: str) -> tuple[str, str] | None:
    """(target response, the command the projection reads from it) for demonstrating `action`, or None when
    the projection would not read that command back (a demo must teach exactly the command it names)."""
    from opid_rllib.prompts import project_action

    response = expert_response(env_name, task=task, action=action, style=style)
    projected, valid = project_action(env_name, response)
    if not valid or not same_action(env_name, projected, action):
        return None
    return response, projected
