"""LLM analyzer over any OpenAI-compatible chat-completions endpoint (OpenAI, Gemini, vLLM, Azure).

Why our own retry loop: the official client's retries are disabled (max_retries=0) so that the
attempt count and backoff (start delay, x2, capped at 30 s; an empty answer also counts as a
failure) are ours, identical for every server, and visible in `Skills.attempts`. An unparsable
answer gets one more request with a repair prompt (`parse_retries` counts total parse attempts).

The API key is a secret: it is never stored in repr, error messages or log lines (`redact`).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any

from opid_rllib.analyzer.base import Analyzer, Skills, TrajectoryRecord, short_error
from opid_rllib.analyzer.parsing import ParseError, parse_analysis
from opid_rllib.analyzer.prompt import build_analysis_prompt, build_retry_prompt

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_API_RETRIES = 5
DEFAULT_RETRY_DELAY_S = 1.0
MAX_RETRY_DELAY_S = 30.0
# Client errors that another identical request cannot fix (bad key, bad model, bad request).
_NO_RETRY_STATUS = {400, 401, 403, 404, 422}
_REDACTED = "***"
# Token shapes worth masking even when we do not know the exact secret (e.g. echoed by a proxy).
_TOKEN_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
)


def redact(text: Any, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Mask known secrets and bearer/sk- tokens in any text bound for logs, errors or dumps."""
    out = str(text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            out = out.replace(secret, _REDACTED)
    for pat in _TOKEN_PATTERNS:
        out = pat.sub(lambda m: (m.group(1) if m.groups() else "") + _REDACTED, out)
    return out


class TransportError(RuntimeError):
    """All API attempts failed."""


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw not in (None, "") else default
    except ValueError:
        raise ValueError(f"{name}={raw!r}: must be a number") from None


class OpenAIAnalyzer(Analyzer):
    """One chat-completions request per trajectory (plus retries); see module doc."""

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int | None = None,
        retry_delay_s: float | None = None,
        max_completion_tokens: int = 4096,
        temperature: float | None = None,
        parse_retries: int = 2,
        max_step_skills: int = 5,
    ):
        super().__init__(max_step_skills=max_step_skills)
        self.model = model or os.environ.get("OPENAI_MODEL") or DEFAULT_MODEL
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        # Keys are read from the environment (api_key_env names the variable) so that they never sit in
        # a config that RLlib/Tune write to checkpoints, params.json and results.
        key = api_key or os.environ.get(api_key_env) or ""
        if not key:
            if self.base_url is None:
                raise ValueError(f"OpenAIAnalyzer: no API key; set {api_key_env} or pass api_key "
                                 "(or set base_url for a local server that needs none)")
            key = "EMPTY"  # local OpenAI-compatible servers (vLLM) accept any key
        self._api_key = key
        # max_retries = total attempts per request, as OPENAI_API_RETRIES in the reference.
        self.max_retries = int(max_retries if max_retries is not None
                               else _env_float("OPENAI_API_RETRIES", DEFAULT_API_RETRIES))
        self.retry_delay_s = float(retry_delay_s if retry_delay_s is not None
                                   else _env_float("OPENAI_API_RETRY_DELAY", DEFAULT_RETRY_DELAY_S))
        self.timeout_s = float(timeout_s)
        self.max_completion_tokens = int(max_completion_tokens)
        self.temperature = temperature
        self.parse_retries = int(parse_retries)
        for field, value, low in (("max_retries", self.max_retries, 1), ("parse_retries", self.parse_retries, 1),
                                  ("timeout_s", self.timeout_s, 1e-3), ("retry_delay_s", self.retry_delay_s, 0)):
            if value < low:
                raise ValueError(f"OpenAIAnalyzer {field}={value}: must be >= {low}")
        self._client = None
        self._client_lock = threading.Lock()

    # ---- secrets --------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"OpenAIAnalyzer(model={self.model!r}, base_url={self.base_url!r}, api_key='{_REDACTED}', "
                f"timeout_s={self.timeout_s}, max_retries={self.max_retries}, "
                f"parse_retries={self.parse_retries}, max_step_skills={self.max_step_skills})")

    __str__ = __repr__

    def _redact(self, text: str) -> str:
        return redact(text, (self._api_key,))

    def __getstate__(self) -> dict:
        # The HTTP client holds sockets and locks; rebuild it lazily after unpickling.
        state = dict(self.__dict__)
        state["_client"] = None
        state.pop("_client_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()

    # ---- transport ------------------------------------------------------------------------
    def _get_client(self):
        with self._client_lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(api_key=self._api_key, base_url=self.base_url,
                                             timeout=self.timeout_s, max_retries=0)
            return self._client

    def _request(self, prompt: str) -> str:
        kwargs: dict[str, Any] = dict(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            max_completion_tokens=self.max_completion_tokens,
            timeout=self.timeout_s,
        )
        if self.temperature is not None:
            kwargs["temperature"] = float(self.temperature)
        resp = self._get_client().chat.completions.create(**kwargs)
        text = resp.choices[0].message.content if resp.choices else None
        if not text or not text.strip():
            raise TransportError("empty response text")
        return text

    def _complete(self, prompt: str, counter: list[int]) -> str:
        """Up to `max_retries` attempts with exponential backoff; raises TransportError."""
        delay = self.retry_delay_s
        last = "no attempt made"
        for attempt in range(1, self.max_retries + 1):
            counter[0] += 1
            try:
                return self._request(prompt)
            except Exception as exc:  # openai.APIError, timeouts, empty text, bad payloads
                last = short_error(self._redact(f"{type(exc).__name__}: {exc}"), 300)
                status = getattr(exc, "status_code", None)
                if status in _NO_RETRY_STATUS:
                    raise TransportError(f"HTTP {status}, not retried: {last}") from None
                if attempt == self.max_retries:
                    break
                log.warning("analyzer API attempt %d/%d failed (%s); retrying in %.2fs",
                            attempt, self.max_retries, last, delay)
                time.sleep(delay)
                delay = min(delay * 2.0, MAX_RETRY_DELAY_S)
        raise TransportError(f"API failed after {self.max_retries} attempts: {last}")

    # ---- analysis -------------------------------------------------------------------------
    def _analyze(self, traj: TrajectoryRecord) -> Skills:
        t0 = time.monotonic()
        counter = [0]
        candidates = [s.index for s in traj.steps]
        original = build_analysis_prompt(traj, self.max_step_skills)
        prompt, error = original, ""
        try:
            for _ in range(self.parse_retries):
                text = self._complete(prompt, counter)
                try:
                    skills = parse_analysis(text, candidates, self.max_step_skills)
                except ParseError as exc:
                    error = str(exc)
                    prompt = build_retry_prompt(original, error, text)
                    continue
                skills.attempts, skills.latency_s = counter[0], time.monotonic() - t0
                return skills
            error = f"unparsable answer after {self.parse_retries} attempts: {error}"
        except TransportError as exc:
            error = str(exc)
        return Skills(error=short_error(self._redact(error)), attempts=counter[0],
                      latency_s=time.monotonic() - t0)
