"""One chat completion read off the wire, streamed (server-sent events) or whole, within a deadline.

Why stream by default: a request the client abandons (timeout) is a generation the server goes on
with unless it notices that nobody listens. llama.cpp, llama-cpp-python and vLLM stop a *streamed*
generation when the connection closes, but finish an unstreamed one: on a one-slot server the
retry then queues behind minutes of work nobody will read. Streaming also lets the deadline bound
the whole answer (every event is a chance to give up), and counts the tokens as they come, which
gives the server's tokens/s for free.

Why read raw bytes, not the client's `Stream`: a proxy's keep-alive blanks or SSE comments would
otherwise hold the request past its deadline without ever reaching our check.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any


class TransportError(RuntimeError):
    """The server's answer is unusable (all attempts failed, empty text, a malformed payload)."""


@dataclass
class Completion:
    text: Any                          # the answer's content (str unless the payload is odd)
    finish_reason: str | None
    completion_tokens: int | None      # usage's count, or the streamed content events
    prompt_tokens: int | None          # usage's count when the server sends one
    gen_s: float                       # streamed: first to last word; whole: sending to the last byte
    streamed: bool


def _timeout(raw: Any) -> Exception:
    import openai

    return openai.APITimeoutError(request=raw.http_response.request)


# What json.loads and the payload's lookups raise on a malformed completion (RecursionError: nested ~1,000 deep).
_PAYLOAD_ERRORS = (ValueError, RecursionError, LookupError, TypeError, AttributeError)


def _payload_error(exc: Exception) -> TransportError:
    return TransportError(f"malformed completion payload ({type(exc).__name__})")


def read_completion(raw: Any, deadline: float, sent_at: float) -> Completion:
    """The completion in `raw` (the client's streaming response to a request sent at `sent_at`), or
    APITimeoutError at `deadline`."""
    import httpx

    try:
        if "text/event-stream" in (raw.headers.get("content-type") or ""):
            return _read_events(raw, deadline)
        return _read_whole(raw, deadline, sent_at)
    except httpx.TimeoutException:   # a read that outwaited timeout_s mid-body is the request's timeout too
        raise _timeout(raw) from None


def _read_whole(raw: Any, deadline: float, sent_at: float) -> Completion:
    """gen_s runs from the request's sending (an unstreamed answer arrives whole): queueing and prompt reading
    count as generating, which under-rates the server's speed, the safe side for holding slots."""
    body = bytearray()
    for chunk in raw.iter_bytes():
        body += chunk
        if time.monotonic() > deadline:
            raise _timeout(raw)
    try:
        payload = json.loads(bytes(body))
        choice = (payload["choices"] or [{}])[0]
        usage = payload.get("usage") or {}
        return Completion(choice["message"]["content"], choice.get("finish_reason"),
                          usage.get("completion_tokens"), usage.get("prompt_tokens"),
                          time.monotonic() - sent_at, streamed=False)
    except _PAYLOAD_ERRORS as exc:
        raise _payload_error(exc) from None


def _read_events(raw: Any, deadline: float) -> Completion:
    parts: list[str] = []
    finish, usage, events, first = None, {}, 0, None
    for line in raw.iter_lines():
        if time.monotonic() > deadline:
            raise _timeout(raw)   # leaving the `with` closes the connection: the server stops generating
        if not line.startswith("data:"):
            continue              # blank separators, SSE comments (": ping"), event names
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            event = json.loads(data)
            if event.get("error"):
                raise TransportError(f"error in stream: {str(event['error'])[:300]}")
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    first = first or time.monotonic()
                    parts.append(piece)
                    events += 1
                finish = choice.get("finish_reason") or finish
        except _PAYLOAD_ERRORS as exc:
            raise _payload_error(exc) from None
    return Completion("".join(parts), finish, usage.get("completion_tokens") or events, usage.get("prompt_tokens"),
                      time.monotonic() - (first or time.monotonic()), streamed=True)
