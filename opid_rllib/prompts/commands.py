"""When two commands are the same: the one comparison the warm start, its greedy check and the eval tables share.

Why here, below sft/ and eval/: both reach it downward (prompts/ imports neither).
"""

from __future__ import annotations

import re

from opid_rllib.prompts._common import canonical_env_name

_SEARCH_BLOCK = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def searchqa_block(expert_action: str) -> tuple[str, str]:
    """('search'|'answer', inner text) of a searchqa expert action; plain text counts as an answer."""
    m = _SEARCH_BLOCK.search(str(expert_action))
    if m is None:
        return "answer", " ".join(str(expert_action).split())
    return m.group(1), " ".join(m.group(2).split())


def command_key(command: str) -> str:
    """A command as compared: lower case, whitespace collapsed."""
    return " ".join(str(command).lower().split())


def same_action(env_name: str, projected: str, expert: str) -> bool:
    if canonical_env_name(env_name) == "searchqa":
        return searchqa_block(projected) == searchqa_block(expert)
    return command_key(projected) == command_key(expert)
