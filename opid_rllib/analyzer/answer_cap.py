"""How many tokens the analyzer may answer with: pure functions, no HTTP.

Why not a big fixed cap: the cap is the longest a runaway answer can run. A small model that
never closes its JSON writes to the cap (or to the context limit when the cap exceeds it), and a
one-slot server (llama.cpp) is busy for minutes with an answer nobody will use. The analysis needs
a few hundred tokens: a two- or three-sentence summary, one episode skill and at most K
one-sentence step skills, so the default is read off that shape (`default_answer_cap`) and is
never more than what the server's context leaves after the prompt (`fit_to_context`), once the
context is known: from the analyzer_config's `context_tokens`, or from the first
"maximum context length" refusal, which OpenAI, vLLM and llama-cpp-python all word alike.

Reasoning models spend hidden tokens inside the same cap; one that used it all answers empty text
with finish_reason "length", and the caller doubles the cap for that endpoint (`RAISE_LIMIT`).
"""

from __future__ import annotations

import re

# The summary (2-3 sentences), the episode skill (a workflow or avoidance rules) and the JSON frame;
# then each step skill: one imperative sentence and its key. About twice what such answers measure.
ANSWER_BASE_TOKENS = 384
STEP_SKILL_TOKENS = 128
# How far an empty, cut answer (a reasoning model's hidden tokens) may raise the cap: x8.
RAISE_LIMIT = 8
# Room kept free beside the estimated prompt: the chat template's tokens and the estimate's error.
CONTEXT_MARGIN_TOKENS = 32
# Fewest answer tokens worth asking for; a prompt that leaves less cannot be analysed.
MIN_ANSWER_TOKENS = 64
# Characters per prompt token before the server has told us (English BPE is ~4; 3 over-counts, the safe side).
DEFAULT_CHARS_PER_TOKEN = 3.0


def default_answer_cap(num_step_skills: int) -> int:
    """Tokens an analysis with `num_step_skills` step skills needs, with about 2x headroom."""
    return ANSWER_BASE_TOKENS + STEP_SKILL_TOKENS * max(0, int(num_step_skills))


def estimate_prompt_tokens(prompt: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    return int(len(prompt) / max(chars_per_token, 0.5)) + 1


def fit_to_context(cap: int, context_tokens: int | None, prompt_tokens: int) -> int:
    """`cap`, lowered to what the context leaves after the prompt; 0 when that is under MIN_ANSWER_TOKENS."""
    if not context_tokens:
        return cap
    room = int(context_tokens) - int(prompt_tokens) - CONTEXT_MARGIN_TOKENS
    return min(cap, room) if room >= MIN_ANSWER_TOKENS else 0


# "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (904 in the messages,
# 4096 in the completion)" (OpenAI, llama-cpp-python, older vLLM); "... maximum context length is 4096 tokens and
# your request has 904 input tokens" (newer vLLM); llama.cpp's server: {"n_prompt_tokens": 904, "n_ctx": 4096}.
_CONTEXT = (re.compile(r"maximum context length is (\d+)", re.I), re.compile(r"\"n_ctx\"\s*:\s*(\d+)"),
            re.compile(r"context window of (\d+)", re.I))
_PROMPT = (re.compile(r"\((\d+) in the messages", re.I), re.compile(r"has (\d+) input tokens", re.I),
           re.compile(r"\"n_prompt_tokens\"\s*:\s*(\d+)"))


def parse_context_error(message: str) -> tuple[int, int | None] | None:
    """(context tokens, prompt tokens or None) from a server's context-length refusal; None if it is not one."""
    text = str(message)
    ctx = next((int(m.group(1)) for p in _CONTEXT if (m := p.search(text))), None)
    if ctx is None:
        return None
    return ctx, next((int(m.group(1)) for p in _PROMPT if (m := p.search(text))), None)
