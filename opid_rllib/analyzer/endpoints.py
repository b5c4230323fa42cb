"""Per-endpoint state shared by every analyzer in the process: a request cap and learned quirks.

Why process-wide, keyed by base URL: the analyzer pool's threads, and several analyzer instances
in one env runner, all talk to the same server. A one-slot server (llama.cpp's) answers requests
one at a time; if eight are sent at once, the last ones wait in the server's queue and hit the
client timeout although the server is fine. So the cap on requests in flight belongs to the
endpoint, not to an analyzer. Learned quirks (a field the server rejects, structured output it
ignores) are remembered per (endpoint, model), so only the first request pays for them.

Timeouts: a timed-out request is abandoned by the client. A streamed one stops on the server when
the connection closes (transport.py); an unstreamed one goes on, and `SlotLimiter.release(hold_s)`
keeps its slot counted until the server would have finished it at the measured tokens/s
(`finish_estimate_s`), so the retry is not queued behind it on the server and does not time out in
turn (see OpenAIAnalyzer's `abandoned_hold_s`). The answer cap's learned parts (the context, the
prompt's characters per token, the reasoning-token scale) live here too (answer_cap.py).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

from opid_rllib.analyzer.answer_cap import (
    DEFAULT_CHARS_PER_TOKEN,
    RAISE_LIMIT,
    estimate_prompt_tokens,
    fit_to_context,
)

RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "none")
TOKEN_LIMIT_PARAMS = ("auto", "max_tokens", "max_completion_tokens")
# Structured-output levels tried in order; a rejection (HTTP 400/422 naming the field) or answers
# that ignore it move one level down, for this endpoint and model, for the rest of the process.
# "json_object_schema" is a JSON object request carrying a schema narrowed for grammar-constrained decoding
# (prompt.constrained_schema; llama-cpp-python enforces it and refuses json_schema): SmolLM2-135M's analyses on
# a real llama-cpp-python server parsed 10 of 10 with it, 3 of 10 with the loose schema (docs/ANALYZER.md).
_LADDERS = {"auto": ("json_schema", "json_object_schema", "json_object", "none"),
            "json_schema": ("json_schema", "none"),
            "json_object": ("json_object_schema", "json_object", "none"), "none": ("none",)}
# Answers to a structured request that are not one JSON object before we stop asking for it.
IGNORED_LIMIT = 2
_OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


class SlotLimiter:
    """A counting semaphore whose released slots can stay taken for a while (abandoned requests)."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self._cond = threading.Condition()
        self._active = 0
        self._held: list[float] = []   # monotonic deadlines of slots kept for abandoned requests

    def _in_use(self, now: float) -> int:
        self._held = [t for t in self._held if t > now]
        return self._active + len(self._held)

    @property
    def in_use(self) -> int:
        with self._cond:
            return self._in_use(time.monotonic())

    def acquire(self) -> float:
        """Wait for a free slot; returns the seconds waited."""
        t0 = time.monotonic()
        with self._cond:
            while True:
                now = time.monotonic()
                if self._in_use(now) < self.capacity:
                    self._active += 1
                    return now - t0
                # Wake at the earliest hold expiry even if nobody releases (no timer threads).
                self._cond.wait(min(self._held) - now if self._held else None)

    def release(self, hold_s: float = 0.0) -> None:
        with self._cond:
            self._active -= 1
            if hold_s > 0:
                self._held.append(time.monotonic() + float(hold_s))
            self._cond.notify_all()


@dataclass
class _ModelQuirks:
    rf_level: int = 0
    ignored_streak: int = 0
    dropped: set[str] = field(default_factory=set)
    context_tokens: int | None = None       # the model's context, once configured or refused
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN   # the fewest seen (over-counting prompts is safe)
    cap_scale: int = 1                      # x2 per empty answer cut at the cap (reasoning tokens)
    tokens_per_s: float | None = None       # generation speed of the latest answer
    streams: bool | None = None             # answered a streamed request with events (None: not seen yet)

    def learn_chars_per_token(self, prompt: str, prompt_tokens: int | None) -> None:
        """From a server's count of a prompt's tokens: keep the fewest characters per token seen."""
        if prompt_tokens:
            self.chars_per_token = min(self.chars_per_token, len(prompt) / int(prompt_tokens))


class Endpoint:
    """Limiter + learned quirks of one base URL (see module doc)."""

    def __init__(self, url: str, capacity: int):
        self.url = url
        self.limiter = SlotLimiter(capacity)
        self._lock = threading.Lock()
        self._quirks: dict[str, _ModelQuirks] = {}

    def _q(self, model: str) -> _ModelQuirks:
        return self._quirks.setdefault(model, _ModelQuirks())

    def response_format(self, model: str, mode: str) -> str:
        ladder = _LADDERS[mode]
        with self._lock:
            return ladder[min(self._q(model).rf_level, len(ladder) - 1)]

    def downgrade_response_format(self, model: str, mode: str, current: str) -> bool:
        """Step below `current` (once, even if several threads saw the same rejection)."""
        ladder = _LADDERS[mode]
        with self._lock:
            q = self._q(model)
            if current not in ladder or current == "none":
                return False
            q.rf_level = max(q.rf_level, ladder.index(current) + 1)
            q.ignored_streak = 0
            return True

    def note_structured_answer(self, model: str, mode: str, current: str, honoured: bool) -> bool:
        """Count answers that ignored the requested format; True when this one made us downgrade."""
        with self._lock:
            q = self._q(model)
            q.ignored_streak = 0 if honoured else q.ignored_streak + 1
            if q.ignored_streak < IGNORED_LIMIT:
                return False
        return self.downgrade_response_format(model, mode, current)

    def token_params(self, model: str, mode: str) -> tuple[str, ...]:
        """Fields that carry the answer-length cap. auto = both (a server honours the one it knows)
        minus any the server rejected; never fewer than one."""
        if mode != "auto":
            return (mode,)
        with self._lock:
            dropped = self._q(model).dropped
        kept = tuple(p for p in ("max_tokens", "max_completion_tokens") if p not in dropped)
        return kept or ("max_completion_tokens",)

    def dropped(self, model: str, name: str) -> bool:
        with self._lock:
            return name in self._q(model).dropped

    def drop_param(self, model: str, name: str) -> bool:
        with self._lock:
            q = self._q(model)
            if name in q.dropped:
                return False
            q.dropped.add(name)
            return True


    # ---- the answer cap (answer_cap.py) ------------------------------------------------------
    def answer_cap(self, model: str, cap: int, prompt: str, scalable: bool) -> int:
        """`cap` (x the learned scale when `scalable`), fitted to the context; 0 = the prompt leaves no room."""
        with self._lock:
            q = self._q(model)
            if scalable:
                cap *= q.cap_scale
            return fit_to_context(cap, q.context_tokens, estimate_prompt_tokens(prompt, q.chars_per_token))

    def note_context(self, model: str, context_tokens: int, prompt_tokens: int | None, prompt: str) -> None:
        with self._lock:
            q = self._q(model)
            q.context_tokens = int(context_tokens)
            q.learn_chars_per_token(prompt, prompt_tokens)

    def raise_cap(self, model: str) -> bool:
        """Double the cap for this model (up to RAISE_LIMIT); False when it is already there."""
        with self._lock:
            q = self._q(model)
            if q.cap_scale >= RAISE_LIMIT:
                return False
            q.cap_scale *= 2
            return True

    def note_answer(self, model: str, prompt: str, prompt_tokens: int | None, completion_tokens: int | None,
                    gen_s: float, streamed: bool | None) -> None:
        """Learn from an answer: prompt chars per token, tokens/s, and whether a streamed request was streamed."""
        with self._lock:
            q = self._q(model)
            if streamed is not None:
                q.streams = streamed
            q.learn_chars_per_token(prompt, prompt_tokens)
            if completion_tokens and gen_s > 0.05:
                q.tokens_per_s = completion_tokens / gen_s

    def finish_estimate_s(self, model: str, cap: int, elapsed_s: float, default_s: float, streamed: bool) -> float:
        """Seconds until the server is done with an abandoned answer of at most `cap` tokens: 0 for a streamed
        request to a server seen streaming (it stops on disconnect), else the rest of the cap at the measured
        speed; `default_s` before any speed is known."""
        with self._lock:
            q = self._q(model)
            if streamed and q.streams:
                return 0.0
            rate = q.tokens_per_s
        return default_s if not rate else max(0.0, cap / rate - elapsed_s)


_ENDPOINTS: dict[str, Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()


def endpoint_for(base_url: str | None, capacity: int) -> Endpoint:
    """The process-wide Endpoint of a base URL; several caps for one URL: the smallest wins."""
    url = (base_url or _OPENAI_DEFAULT_URL).rstrip("/")
    with _ENDPOINTS_LOCK:
        ep = _ENDPOINTS.get(url)
        if ep is None:
            ep = _ENDPOINTS[url] = Endpoint(url, capacity)
        elif capacity < ep.limiter.capacity:
            with ep.limiter._cond:
                ep.limiter.capacity = int(capacity)
        return ep


# Words that identify a field in an error text ("json_schema is not supported" means response_format).
_ALIASES = {"response_format": ("response_format", "json_schema", "json_object")}


def rejected_field(message: str, param: str | None, sent: tuple[str, ...]) -> str | None:
    """Which of the optional fields we sent did the server reject? The error's `param` when it is
    one of them (OpenAI), else the one named first in the message (pydantic/FastAPI 422 bodies
    list the field's location; OpenAI's text names the bad field before the suggested one)."""
    if param in sent:
        return param
    text = str(message)
    best, best_pos = None, len(text) + 1
    for name in sent:
        for word in _ALIASES.get(name, (name,)):
            m = re.search(rf"(?<![A-Za-z_]){re.escape(word)}(?![A-Za-z_])", text)
            if m and m.start() < best_pos:
                best, best_pos = name, m.start()
    return best
