"""Signpost per-step prompt: short, in the shared layout (task line, history window, observation, format
paragraph), so skills go in the same slots as in ALFWorld and a tiny model trains on it in seconds."""

from __future__ import annotations

from typing import Sequence

from opid_rllib.prompts._common import TURN_ANCHOR, format_history, history_window

TASK_MARKER = "Your task is to:"
INSTRUCTION = TURN_ANCHOR + ": <think> </think> <action>open colour door</action>"
# The commands are named by their form, not listed (the env still reports them in admissible_actions): a list
# would put every door's colour in the prompt, so that only the sign's position, not its words, tells the right
# one, and would double the prompt that every rollout and update pays for.
TEMPLATE = "{task_line}\n{history}{obs}\n" + INSTRUCTION

# Generation stops right after the first of these (the response is complete once the action is).
STOP_STRINGS = ("</action>",)


def build(*, task: str, obs: str, history: Sequence[tuple[str, str]], admissible: Sequence[str],
          step: int, history_length: int) -> str:
    lines = [ln for ln in str(obs).strip().splitlines() if not ln.startswith(TASK_MARKER)]
    window = history_window(history, history_length) if step > 0 else []
    hist = f"{format_history(window)}\n" if window else ""
    return TEMPLATE.format(task_line=f"{TASK_MARKER} {str(task).strip()}.", history=hist,
                           obs="\n".join(lines).strip())
