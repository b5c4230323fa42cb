"""OpenAIAnalyzer end to end against a real local HTTP server (tests/analyzer/fake_openai_server.py)."""

import logging
import pickle
import time

import pytest

from opid_rllib.analyzer import OpenAIAnalyzer, make_analyzer
from opid_rllib.analyzer.answer_cap import default_answer_cap
from opid_rllib.analyzer.redact import redact

KEY = "sk-test-ZZUNIQUEKEY-9f8e7d6c5b4a"


def make(server, **kw):
    cfg = dict(model="fake-analyzer-1", base_url=server.base_url, api_key=KEY,
               timeout_s=2.0, max_retries=3, retry_delay_s=0.01)
    cfg.update(kw)
    return make_analyzer("openai", **cfg)


def _auth(req):
    return {k.lower(): v for k, v in req["headers"].items()}.get("authorization", "")


def test_good_json(fake_server, success_traj):
    s = make(fake_server).analyze(success_traj)
    assert s.ok and s.attempts == 1 and s.latency_s > 0
    assert s.step_skills == {0: "At step 0, act on the goal object directly.",
                             1: "At step 1, act on the goal object directly."}
    (req,) = fake_server.requests
    assert req["path"] == "/v1/chat/completions"
    body = req["body"]
    assert body["model"] == "fake-analyzer-1"
    # The default cap is read off the answer's shape (answer_cap.py), and the answer streams.
    k = min(5, len(success_traj.steps))
    assert body["max_completion_tokens"] == body["max_tokens"] == default_answer_cap(k) < 4096
    assert body["stream"] is True and "temperature" not in body
    (msg,) = body["messages"]
    assert msg["role"] == "user"
    for piece in ("return ONLY valid JSON", "Task: put a cool mug in shelf.", "episode_success: success",
                  "Candidate steps: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "Response: <think>I should look.</think>",
                  "Return: 10.000000"):
        assert piece in msg["content"], piece
    assert _auth(req) == f"Bearer {KEY}"   # the key reaches the server, and only the server


def test_fenced_answer_and_temperature(fake_server, failure_traj):
    fake_server.push("fenced")
    s = make(fake_server, temperature=0.3).analyze(failure_traj)
    assert s.ok and s.attempts == 1
    assert fake_server.requests[0]["body"]["temperature"] == 0.3


def test_junk_then_good_uses_parse_retry(fake_server, failure_traj):
    fake_server.push("junk")
    s = make(fake_server).analyze(failure_traj)
    assert s.ok and s.attempts == 2
    retry_prompt = fake_server.requests[1]["body"]["messages"][0]["content"]
    assert retry_prompt.startswith(fake_server.requests[0]["body"]["messages"][0]["content"].rstrip())
    assert "Parse error: no JSON object found" in retry_prompt
    assert "Sorry, I cannot analyze this episode right now." in retry_prompt


def test_junk_twice_gives_error(fake_server, failure_traj):
    fake_server.push("junk", "junk")
    s = make(fake_server).analyze(failure_traj)
    assert not s.ok and s.attempts == 2 and "unparsable answer after 2 attempts" in s.error


def test_http_500_then_good_backs_off(fake_server, success_traj):
    fake_server.push("error500", "error500")
    s = make(fake_server, retry_delay_s=0.05).analyze(success_traj)
    assert s.ok and s.attempts == 3
    assert s.latency_s >= 0.05 + 0.10          # delays 0.05 then 0.10 (x2)


def test_always_500_errors_after_n_attempts(fake_server, success_traj, caplog):
    fake_server.default = "error500"
    with caplog.at_level(logging.WARNING, logger="opid_rllib"):
        s = make(fake_server, max_retries=4).analyze(success_traj)
    assert not s.ok and s.attempts == 4 and len(fake_server.requests) == 4
    assert s.error.startswith("API failed after 4 attempts") and "500" in s.error
    assert len(s.error) <= 500
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 3


def test_empty_content_counts_as_failure(fake_server, success_traj):
    fake_server.default = "empty"
    s = make(fake_server, max_retries=2).analyze(success_traj)
    assert not s.ok and s.attempts == 2 and "empty response" in s.error


def test_slow_response_times_out_without_hanging(fake_server, success_traj):
    fake_server.default = "slow"
    t0 = time.monotonic()
    s = make(fake_server, timeout_s=0.3, max_retries=2).analyze(success_traj)
    assert time.monotonic() - t0 < 3.0
    assert not s.ok and s.attempts == 2 and "time" in s.error.lower()


def test_trickled_answer_times_out_on_the_whole_request(fake_server, success_traj):
    """timeout_s bounds the whole request: a body trickled a blank every 0.2 s never waits a single read
    out, but its 3 s are over the 0.6 s budget; the same trickle within the budget is taken."""
    fake_server.default, fake_server.slow_s = "trickle", 3.0
    a = make(fake_server, timeout_s=0.6, max_retries=2)
    t0 = time.monotonic()
    s = a.analyze(success_traj)
    assert time.monotonic() - t0 < 2.5
    assert not s.ok and s.attempts == 2 and "time" in s.error.lower() and a.stats()["timeouts"] == 2
    fake_server.slow_s = 0.6
    assert make(fake_server, timeout_s=3.0).analyze(success_traj).ok


def test_unreachable_server_is_an_error_not_an_exception(success_traj):
    a = OpenAIAnalyzer(base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=2, retry_delay_s=0.01,
                       timeout_s=1.0)
    s = a.analyze(success_traj)
    assert not s.ok and s.attempts == 2 and s.error.startswith("API failed")


def test_api_key_never_leaks(fake_server, success_traj, caplog):
    fake_server.push("echo_auth")            # a 401 whose body echoes "Bearer <key>"
    fake_server.default = "error500"
    a = make(fake_server, max_retries=2)
    with caplog.at_level(logging.DEBUG):
        s1 = a.analyze(success_traj)         # 401: not retried
        s2 = a.analyze(success_traj)         # 500 twice
    assert s1.attempts == 1 and "401" in s1.error and s2.attempts == 2
    texts = [repr(a), str(a), s1.error, s2.error, repr(s1), str(s1.to_dict()), caplog.text]
    texts += [r.getMessage() for r in caplog.records]
    assert caplog.records                    # we did capture the client's and our log lines
    for t in texts:
        assert KEY not in t and "ZZUNIQUEKEY" not in t
    assert "***" in s1.error
    clone = pickle.loads(pickle.dumps(a))    # Ray may ship it; the HTTP client is rebuilt lazily
    assert clone.analyze(success_traj).attempts == 2 and KEY not in repr(clone)


def test_redact_helper():
    assert redact(f"key={KEY} header: Bearer abc.def", [KEY]) == "key=*** header: Bearer ***"
    assert "sk-other" not in redact("leaked sk-otherSecret12345")


def test_env_vars_and_config_errors(monkeypatch, fake_server):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.base_url)
    monkeypatch.setenv("OPENAI_API_RETRIES", "7")
    monkeypatch.setenv("OPENAI_API_RETRY_DELAY", "0.25")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    a = make_analyzer("azure")
    assert (a.model, a.base_url, a.max_retries, a.retry_delay_s) == \
        ("gemini-2.5-flash", fake_server.base_url, 7, 0.25)
    monkeypatch.setenv("OPENAI_MODEL", "my-model")
    assert OpenAIAnalyzer(max_retries=1).model == "my-model"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert OpenAIAnalyzer()._api_key == "EMPTY"          # local server: no key needed
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIAnalyzer()
    with pytest.raises(ValueError, match="parse_retries"):
        OpenAIAnalyzer(api_key=KEY, parse_retries=0)


def test_truncated_errors_do_not_expose_a_key_prefix(success_traj):
    azure_key = "azk0ZZUNIQUE0123456789abcdef"   # no sk- shape: only exact-secret redaction can catch it

    class Boom(OpenAIAnalyzer):
        def _analyze(self, traj):
            raise RuntimeError("x" * 470 + azure_key + " trailing")   # the 500-char cut lands inside the key

    s = Boom(api_key=azure_key).analyze(success_traj)
    assert len(s.error) <= 500 and "ZZUNIQUE" not in s.error and "azk0" not in s.error


def test_option_values_are_checked_at_construction():
    """Each wrong value names its field; strings from the command line that are numbers are taken."""
    for option, value in (("temperature", "hot"), ("max_retries", "five"), ("timeout_s", "fast"),
                          ("max_completion_tokens", None), ("retry_delay_s", [1]), ("abandoned_hold_s", "x")):
        with pytest.raises(ValueError, match=f"OpenAIAnalyzer {option}="):
            OpenAIAnalyzer(api_key=KEY, **{option: value})
    with pytest.raises(ValueError, match="temperature=-1.0: must be >= 0"):
        OpenAIAnalyzer(api_key=KEY, temperature=-1)
    a = OpenAIAnalyzer(api_key=KEY, temperature="0.3", max_retries="2", timeout_s="1.5")
    assert (a.temperature, a.max_retries, a.timeout_s) == (0.3, 2, 1.5)


def test_deeply_nested_answer_gets_the_repair_request(fake_server, failure_traj):
    """An answer nested past Python's recursion limit is a parse failure like any other: the repair prompt
    follows, not a lost trajectory."""
    fake_server.push("nested")
    s = make(fake_server).analyze(failure_traj)
    assert s.ok and s.attempts == 2, s.error
    assert "Parse error" in fake_server.requests[1]["body"]["messages"][0]["content"]


def test_deeply_nested_answer_is_not_a_transport_failure(fake_server, failure_traj):
    """With response_format on, the nested answer is counted as ignoring it, not retried as a failed request."""
    fake_server.push("nested")
    fake_server.response_formats = ("json_schema", "json_object")
    a = make(fake_server, response_format="json_object", max_completion_tokens=4096)  # 1,500 "words" fit
    s = a.analyze(failure_traj)
    assert s.ok and s.attempts == 2, s.error
    assert a.stats()["response_format_ignored"] == 1
