"""LLM analyzer over any OpenAI-compatible chat-completions endpoint (OpenAI, Gemini, vLLM, Azure,
llama.cpp).

Why our own retry loop: the official client's retries are disabled (max_retries=0) so that the
attempt count and backoff (start delay, x2, capped at 30 s; an empty answer also counts as a
failure) are ours, identical for every server, and visible in `Skills.attempts`. An unparsable
answer gets one more request with a repair prompt (`parse_retries` counts total parse attempts).

Why the request adapts to the server (remembered per endpoint and model, see endpoints.py):
servers differ in which fields they honour. llama-cpp-python ignores `max_completion_tokens` (asked
for 5 tokens, it wrote 570) and OpenAI's reasoning models reject `max_tokens`, so the cap goes out
in both fields and a field the server rejects (HTTP 400/422, or a 5xx whose body names it) is
dropped. Small models answer in prose unless asked for structured output, so `response_format` is
sent (JSON schema, then a JSON object carrying a narrowed schema that grammar-constrained servers such as
llama-cpp-python enforce, then a plain JSON object, then nothing) and stepped down when rejected or ignored;
the lenient parser stays either way. A "maximum context length" refusal teaches the endpoint its
context, and the cap is fitted to it (answer_cap.py). Such re-sends are immediate and do not use
up `max_retries`.

Why the answer streams and the cap is small (answer_cap.py, transport.py): an answer the client
abandons must not keep a one-slot server generating for minutes while the retries queue behind it.

The API key is a secret: it is never stored in repr, error messages or log lines (`redact`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

from opid_rllib.analyzer.answer_cap import default_answer_cap, parse_context_error
from opid_rllib.analyzer.base import Analyzer, Skills, TrajectoryRecord, short_error
from opid_rllib.analyzer.endpoints import (
    RESPONSE_FORMATS,
    TOKEN_LIMIT_PARAMS,
    Endpoint,
    endpoint_for,
    rejected_field,
)
from opid_rllib.analyzer.parsing import ParseError, parse_analysis
from opid_rllib.analyzer.prompt import build_analysis_prompt, build_retry_prompt, response_format_payload
from opid_rllib.analyzer.redact import REDACTED as _REDACTED
from opid_rllib.analyzer.redact import redact
from opid_rllib.analyzer.transport import Completion, TransportError, read_completion

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_API_RETRIES = 5
DEFAULT_RETRY_DELAY_S = 1.0
MAX_RETRY_DELAY_S = 30.0
# Client errors that another identical request cannot fix (bad key, bad model, bad request).
_NO_RETRY_STATUS = {400, 401, 403, 404, 422}
# Re-sends we adapt per request (response_format has 3 levels, 2 token fields, stream, the context, 3 cap raises).
_MAX_ADAPTATIONS = 8
STAT_KEYS = ("requests", "timeouts", "slot_wait_s", "response_format_fallbacks", "response_format_ignored",
             "token_param_fallbacks", "stream_fallbacks", "context_refusals", "token_cap_raises")
STREAM_MODES = ("auto", True, False)
class NoRoomError(TransportError):
    """The prompt leaves the context too little room for an answer: no retry can change that."""


def _is_json_object(text: str) -> bool:
    """What a server honouring response_format returns: the whole answer is one JSON object."""
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # a degenerate answer nested ~1,000 deep is not one
        return False


def _number(fld: str, value: Any, kind: type) -> Any:
    """`kind(value)` (options may arrive as strings from the command line), or an error naming the field."""
    try:
        return kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"OpenAIAnalyzer {fld}={value!r}: must be {what}") from None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw not in (None, "") else default
    except ValueError:
        raise ValueError(f"{name}={raw!r}: must be a number") from None


class OpenAIAnalyzer(Analyzer):
    """One chat-completions request per trajectory (plus retries); see module doc.

    analyzer_config keys (all optional): model, base_url, api_key_env, max_retries, retry_delay_s,
    temperature, parse_retries, and
      timeout_s                seconds one request may take in all, reading the answer included (60);
      max_completion_tokens    the answer-length cap: "auto" (384 + 128 per step skill asked for, i.e. 1,024
                               at 5; doubled, up to x8, after an empty answer cut at the cap, which is a
                               reasoning model's hidden tokens) or a number of tokens; either way never more
                               than the context leaves after the prompt, once the context is known;
      context_tokens           the server's context length, if known (else learned from its first
                               "maximum context length" refusal);
      stream                   "auto" (stream, and stop streaming if the server refuses the field) | true |
                               false: a streamed answer the client abandons stops on the server;
      token_limit_param        "auto" (both max_tokens and max_completion_tokens, dropping one the
                               server rejects) | "max_tokens" | "max_completion_tokens";
      response_format          "auto" (json_schema, then json_object with the schema, then plain json_object,
                               then none) | "json_schema" | "json_object" (with, then without the schema) |
                               "none"; a rejection (400/422 naming it) or 2 answers
                               in a row that are not one JSON object step down, per endpoint and model;
      max_concurrent_requests  requests in flight per base URL, shared by every analyzer of the
                               process (8; set it to the server's slots, 1 for a one-slot llama.cpp;
                               each env-runner process has its own, so N runners send up to N x this);
      abandoned_hold_s         after a timeout, that request's slot stays taken this long, for a server that
                               keeps working on an abandoned request: the retry then starts on a server
                               that has finished it instead of queueing behind it and timing out too.
                               Default: 0 for a streamed request to a server seen streaming (it stopped),
                               else until the server would have written the cap at its measured tokens/s
                               (timeout_s before any answer was measured).
    Counters (stats(), logged by the env runner under analyzer/): STAT_KEYS.
    """

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
        max_completion_tokens: int | str = "auto",
        temperature: float | None = None,
        parse_retries: int = 2,
        max_step_skills: int = 5,
        token_limit_param: str = "auto",
        response_format: str = "auto",
        max_concurrent_requests: int = 8,
        abandoned_hold_s: float | None = None,
        context_tokens: int | None = None,
        stream: bool | str = "auto",
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
        self.max_retries = _number("max_retries", max_retries if max_retries is not None
                                   else _env_float("OPENAI_API_RETRIES", DEFAULT_API_RETRIES), int)
        self.retry_delay_s = _number("retry_delay_s", retry_delay_s if retry_delay_s is not None
                                     else _env_float("OPENAI_API_RETRY_DELAY", DEFAULT_RETRY_DELAY_S), float)
        self.timeout_s = _number("timeout_s", timeout_s, float)
        self.max_completion_tokens = ("auto" if max_completion_tokens == "auto"
                                      else _number("max_completion_tokens", max_completion_tokens, int))
        self.context_tokens = None if context_tokens is None else _number("context_tokens", context_tokens, int)
        # Checked here, not at the first request: a bad value would otherwise fail every request of the run.
        self.temperature = None if temperature is None else _number("temperature", temperature, float)
        self.parse_retries = _number("parse_retries", parse_retries, int)
        self.max_concurrent_requests = _number("max_concurrent_requests", max_concurrent_requests, int)
        self.abandoned_hold_s = None if abandoned_hold_s is None else _number("abandoned_hold_s",
                                                                               abandoned_hold_s, float)
        for fld, value, low in (("max_retries", self.max_retries, 1), ("parse_retries", self.parse_retries, 1),
                                ("timeout_s", self.timeout_s, 1e-3), ("retry_delay_s", self.retry_delay_s, 0),
                                ("max_completion_tokens", 1 if self.max_completion_tokens == "auto"
                                 else self.max_completion_tokens, 1),
                                ("context_tokens", self.context_tokens or 128, 128),
                                ("max_concurrent_requests", self.max_concurrent_requests, 1),
                                ("abandoned_hold_s", self.abandoned_hold_s or 0, 0),
                                ("temperature", 0 if self.temperature is None else self.temperature, 0)):
            if value < low:
                raise ValueError(f"OpenAIAnalyzer {fld}={value}: must be >= {low}")
        for fld, value, choices in (("token_limit_param", token_limit_param, TOKEN_LIMIT_PARAMS),
                                    ("response_format", response_format, RESPONSE_FORMATS)):
            if value not in choices:
                raise ValueError(f"OpenAIAnalyzer {fld}={value!r}: choose one of {', '.join(choices)}")
        if stream not in STREAM_MODES:
            raise ValueError(f"OpenAIAnalyzer stream={stream!r}: choose auto, true or false")
        self.stream = stream
        self.token_limit_param = token_limit_param
        self.response_format = response_format
        self._client = None
        self._client_lock = threading.Lock()
        self._stats: dict[str, float] = dict.fromkeys(STAT_KEYS, 0)

    # ---- secrets --------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"OpenAIAnalyzer(model={self.model!r}, base_url={self.base_url!r}, api_key='{_REDACTED}', "
                f"timeout_s={self.timeout_s}, max_retries={self.max_retries}, "
                f"parse_retries={self.parse_retries}, max_step_skills={self.max_step_skills}, "
                f"response_format={self.response_format!r}, "
                f"max_concurrent_requests={self.max_concurrent_requests})")

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

    # ---- counters -------------------------------------------------------------------------
    def _count(self, key: str, value: float = 1) -> None:
        with self._client_lock:
            self._stats[key] += value

    def stats(self) -> dict[str, float]:
        """Cumulative counters (see STAT_KEYS) for the pool's metrics."""
        with self._client_lock:
            return dict(self._stats)

    # ---- transport ------------------------------------------------------------------------
    def _get_client(self):
        with self._client_lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(api_key=self._api_key, base_url=self.base_url,
                                             timeout=self.timeout_s, max_retries=0)
            return self._client

    def _endpoint(self) -> Endpoint:
        return endpoint_for(self.base_url, self.max_concurrent_requests)

    def _request(self, prompt: str, counter: list[int], candidates: list[int]) -> str:
        """One answer. Re-sends at once (without consuming a retry) when the server rejects an optional
        field or the context, or a reasoning model's hidden tokens used up the cap; raises on any other failure."""
        import openai

        ep = self._endpoint()
        auto = self.max_completion_tokens == "auto"
        if self.context_tokens:
            ep.note_context(self.model, self.context_tokens, None, prompt)
        k = min(self.max_step_skills, len(candidates))
        base_cap = default_answer_cap(k) if auto else self.max_completion_tokens
        for _ in range(_MAX_ADAPTATIONS + 1):
            cap = ep.answer_cap(self.model, base_cap, prompt, scalable=auto)  # the learned scale and context may move
            if cap <= 0:
                raise NoRoomError(f"the prompt ({len(prompt)} chars) leaves the server's context too little room "
                                  "for an answer; raise its context (llama.cpp: --n_ctx) or lower max_step_skills")
            rf = ep.response_format(self.model, self.response_format)
            optional: dict[str, Any] = {p: cap for p in ep.token_params(self.model, self.token_limit_param)}
            if rf != "none":
                optional["response_format"] = response_format_payload(rf, candidates)
            stream = self.stream is True or (self.stream == "auto" and not ep.dropped(self.model, "stream"))
            if stream:
                optional["stream"] = True
            kwargs: dict[str, Any] = dict(model=self.model, messages=[{"role": "user", "content": prompt}],
                                          timeout=self.timeout_s, **optional)
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
            waited = ep.limiter.acquire()
            hold, sent_at = 0.0, time.monotonic()
            try:
                counter[0] += 1
                self._count("slot_wait_s", waited)
                self._count("requests")
                answer = self._create(kwargs)
            except openai.APITimeoutError:
                self._count("timeouts")
                hold = self._hold_s(ep, stream, cap, time.monotonic() - sent_at)
                raise
            except openai.APIStatusError as exc:
                # A refusal of an optional field: OpenAI's 400, FastAPI's 422, and a 5xx whose body names the field
                # (llama-cpp-python 0.3.36 answers json_schema with a 500 and a pydantic body); other errors retry.
                refusal = exc.status_code in (400, 422) or exc.status_code >= 500
                if not refusal or not self._adapt(ep, exc, tuple(optional), rf, prompt):
                    raise
                continue
            finally:
                ep.limiter.release(hold)
            ep.note_answer(self.model, prompt, answer.prompt_tokens, answer.completion_tokens, answer.gen_s,
                           answer.streamed if stream else None)
            text = answer.text
            if not isinstance(text, str) or not text.strip():
                if answer.finish_reason == "length" and auto and ep.raise_cap(self.model):
                    self._count("token_cap_raises")   # hidden reasoning tokens used the whole cap
                    log.warning("analyzer endpoint %s: model %s wrote nothing within %d tokens; doubling the cap",
                                ep.url, self.model, cap)
                    continue
                raise TransportError("empty response text")
            self._note_format(ep, rf, answer)
            return text
        raise TransportError(f"server kept refusing the request after {_MAX_ADAPTATIONS} re-sends")

    def _hold_s(self, ep: Endpoint, streamed: bool, cap: int, elapsed_s: float) -> float:
        """How long an abandoned request's slot stays taken (see abandoned_hold_s)."""
        if self.abandoned_hold_s is not None:
            return self.abandoned_hold_s
        return ep.finish_estimate_s(self.model, cap, elapsed_s, self.timeout_s, streamed)

    def _note_format(self, ep: Endpoint, rf: str, answer: Completion) -> None:
        if rf != "none" and answer.finish_reason != "length":  # a cut answer proves nothing
            honoured = _is_json_object(answer.text)
            self._count("response_format_ignored", not honoured)
            if ep.note_structured_answer(self.model, self.response_format, rf, honoured):
                self._count("response_format_fallbacks")
                log.warning("analyzer endpoint %s ignores response_format=%s for model %s; stepping down",
                            ep.url, rf, self.model)

    def _create(self, kwargs: dict[str, Any]) -> Completion:
        """One completion, read within timeout_s in all (transport.py). The client's timeout bounds each
        socket read only, so a server or proxy that keeps sending bytes (keep-alive blanks) would otherwise
        hold the request, and the rollout waiting on its skills, for as long as it likes."""
        sent_at = time.monotonic()
        with self._get_client().chat.completions.with_streaming_response.create(**kwargs) as raw:
            return read_completion(raw, sent_at + self.timeout_s, sent_at)

    def _adapt(self, ep: Endpoint, exc: Exception, sent: tuple[str, ...], rf: str, prompt: str) -> bool:
        """Learn from a refusal (an optional field, the context); False when the error is about something else."""
        message = self._redact(str(getattr(exc, "body", None) or exc))
        context = parse_context_error(message)
        if context is not None:
            ep.note_context(self.model, context[0], context[1], prompt)
            self._count("context_refusals")
            log.warning("analyzer endpoint %s: %d-token context for model %s; fitting the answer cap to it",
                        ep.url, context[0], self.model)
            return True
        name = rejected_field(message, getattr(exc, "param", None), sent)
        if name == "response_format":
            changed = ep.downgrade_response_format(self.model, self.response_format, rf)
            key = "response_format_fallbacks"
        elif name == "stream" and self.stream == "auto":
            changed, key = ep.drop_param(self.model, name), "stream_fallbacks"
        elif name in ("max_tokens", "max_completion_tokens") and len([p for p in sent if p.startswith("max_")]) > 1:
            changed, key = ep.drop_param(self.model, name), "token_param_fallbacks"
        else:
            return False
        if changed:
            self._count(key)
            log.warning("analyzer endpoint %s rejected %s for model %s; sending without it from now on (%s)",
                        ep.url, name, self.model, short_error(message, 200))
        return True

    def _complete(self, prompt: str, counter: list[int], candidates: list[int]) -> str:
        """Up to `max_retries` attempts with exponential backoff; raises TransportError."""
        delay = self.retry_delay_s
        last = "no attempt made"
        for attempt in range(1, self.max_retries + 1):
            try:
                return self._request(prompt, counter, candidates)
            except NoRoomError:
                raise
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
        counter = [0]  # HTTP requests sent
        candidates = [s.index for s in traj.steps]
        original = build_analysis_prompt(traj, self.max_step_skills)
        prompt, error = original, ""
        try:
            for _ in range(self.parse_retries):
                text = self._complete(prompt, counter, candidates)
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
