"""Per-step prompts, skill slots, action projection and chat wrapping (pure functions).

Why pure: the env runner builds prompts while rolling out and the learner connector rebuilds
the very same prompts with skills inserted for teacher re-scoring; both must agree byte for byte.
"""

from __future__ import annotations

from typing import Sequence

from opid_rllib.prompts import alfworld, searchqa, signpost, webshop
from opid_rllib.prompts._common import ENV_NAMES, TURN_ANCHOR, canonical_env_name
from opid_rllib.prompts.chat import chat_prompt, encode_prompts, truncate_left
from opid_rllib.prompts.projection import project_action
from opid_rllib.prompts.skills import insert_skills

_BUILDERS = {"alfworld": alfworld.build, "webshop": webshop.build, "searchqa": searchqa.build,
             "signpost": signpost.build}
_STOP_STRINGS = {"alfworld": alfworld.STOP_STRINGS, "webshop": webshop.STOP_STRINGS, "searchqa": searchqa.STOP_STRINGS,
                 "signpost": signpost.STOP_STRINGS}


def action_stop_strings(env_name: str) -> tuple[str, ...]:
    """Closing tags that end a response for this env's prompt; () for an env with no template.

    Why: the projection reads only the first action block, so everything a model writes after
    the closing tag is wasted decoding (an untrained model otherwise fills max_new_tokens).
    """
    try:
        return _STOP_STRINGS[canonical_env_name(env_name)]
    except ValueError:
        return ()


def build_prompt(env_name: str, *, task: str, obs: str, history: Sequence[tuple[str, str]] = (),
                 admissible: Sequence[str] | None = None, step: int = 0, history_length: int = 0) -> str:
    """The single-turn user prompt for one env step.

    history: (observation, executed action) pairs of earlier steps, oldest first; only the last
    `history_length` are shown (<= 0: none). `step` = number of actions already taken.
    """
    build = _BUILDERS[canonical_env_name(env_name)]
    return build(task=task, obs=obs, history=list(history or ()), admissible=list(admissible or ()),
                 step=int(step), history_length=int(history_length))


__all__ = ["ENV_NAMES", "TURN_ANCHOR", "action_stop_strings", "build_prompt", "canonical_env_name", "chat_prompt",
           "insert_skills", "project_action", "truncate_left"]
