"""OpenAIAnalyzer against servers that behave like real OpenAI-compatible ones (a real local HTTP
server, tests/analyzer/fake_openai_server.py): llama-cpp-python (obeys only max_tokens, knows only
json_object, one slot that finishes abandoned requests), OpenAI reasoning models (reject
max_tokens), strict servers (422 on unknown fields), servers that ignore response_format."""

import contextlib
import time

import pytest
from fake_openai_server import FakeOpenAIServer
from traj_factory import FAILURE_ROWS, SUCCESS_ROWS, make_traj

from opid_rllib.analyzer import AnalyzerPool, make_analyzer
from opid_rllib.analyzer.endpoints import SlotLimiter, endpoint_for, rejected_field
from opid_rllib.analyzer.prompt import ANALYSIS_JSON_SCHEMA, constrained_schema


@contextlib.contextmanager
def server(**kw):
    srv = FakeOpenAIServer(**kw).start()
    try:
        yield srv
    finally:
        srv.stop()


def make(srv, **kw):
    cfg = dict(model="fake-analyzer-1", base_url=srv.base_url, api_key="EMPTY", timeout_s=2.0,
               max_retries=2, retry_delay_s=0.01)
    cfg.update(kw)
    return make_analyzer("openai", **cfg)


def trajs(n):
    return [make_traj(SUCCESS_ROWS if i % 2 else FAILURE_ROWS, success=bool(i % 2)) for i in range(n)]


# ---- the answer-length cap ------------------------------------------------------------------
def test_cap_reaches_a_server_that_obeys_only_max_tokens():
    with server(default="prose", honours=("max_tokens",)) as srv:
        s = make(srv, max_completion_tokens=5, response_format="none", parse_retries=1).analyze(trajs(1)[0])
        body = srv.requests[0]["body"]
        assert body["max_tokens"] == 5 and body["max_completion_tokens"] == 5
        assert srv.replies == [(" ".join(srv.replies[0][0].split()[:5]), "length")]
        assert len(srv.replies[0][0].split()) == 5 and not s.ok
        # The old request shape (only max_completion_tokens) is what let llama.cpp write 570 tokens.
        make(srv, max_completion_tokens=5, response_format="none", parse_retries=1,
             token_limit_param="max_completion_tokens").analyze(trajs(1)[0])
        assert "max_tokens" not in srv.requests[1]["body"]
        assert srv.replies[1][1] == "stop" and len(srv.replies[1][0].split()) > 500


@pytest.mark.parametrize("field,status,kept", [("max_tokens", 400, "max_completion_tokens"),
                                               ("max_completion_tokens", 422, "max_tokens")])
def test_a_rejected_cap_field_is_dropped_once_and_remembered(field, status, kept):
    with server(rejects={field: status}) as srv:
        a = make(srv, max_retries=1)
        first, second = a.analyze(trajs(1)[0]), a.analyze(trajs(1)[0])
        assert first.ok and first.attempts == 2 and second.ok and second.attempts == 1
        bodies = [r["body"] for r in srv.requests]
        assert field in bodies[0] and all(field not in b and b[kept] == bodies[0][field] for b in bodies[1:])
        assert len(bodies) == 3
        assert a.stats()["token_param_fallbacks"] == 1 and a.stats()["requests"] == 3


def test_an_explicit_cap_field_the_server_rejects_is_a_clear_error():
    with server(rejects={"max_tokens": 400}) as srv:
        s = make(srv, token_limit_param="max_tokens").analyze(trajs(1)[0])
        assert not s.ok and s.attempts == 1 and "HTTP 400, not retried" in s.error and "max_tokens" in s.error


def test_an_unrelated_400_is_not_taken_for_a_field_rejection():
    with server(rejects={"temperature": 400}) as srv:
        a = make(srv, temperature=0.5)
        s = a.analyze(trajs(1)[0])
        assert not s.ok and s.attempts == 1 and "temperature" in s.error
        assert a.stats()["token_param_fallbacks"] == a.stats()["response_format_fallbacks"] == 0


# ---- structured output ----------------------------------------------------------------------
def test_small_model_answers_json_when_asked_for_a_schema():
    with server(default="prose", response_formats=("json_schema", "json_object")) as srv:
        s = make(srv).analyze(trajs(1)[0])
        assert s.ok and s.attempts == 1
        rf = srv.requests[0]["body"]["response_format"]
        assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == ANALYSIS_JSON_SCHEMA
        plain = make(srv, response_format="none").analyze(trajs(1)[0])   # without it: prose, twice
        assert not plain.ok and "unparsable" in plain.error and "response_format" not in srv.requests[-1]["body"]


def test_json_schema_rejected_falls_back_to_json_object_per_endpoint():
    """llama-cpp-python validates response_format.type in {text, json_object}: a 422 for json_schema."""
    with server(default="prose", response_formats=("text", "json_object")) as srv:
        a = make(srv)
        first = a.analyze(trajs(1)[0])
        assert first.ok and first.attempts == 2
        types = [r["body"]["response_format"]["type"] for r in srv.requests]
        assert types == ["json_schema", "json_object"]
        other = make(srv)                      # another analyzer on the same endpoint and model
        assert other.analyze(trajs(1)[0]).attempts == 1
        # json_object carrying the schema narrowed to this trajectory's steps and to sentences: llama-cpp-python
        # constrains the answer to it token by token
        steps = [s.index for s in trajs(1)[0].steps]
        assert srv.requests[-1]["body"]["response_format"] == {"type": "json_object",
                                                               "schema": constrained_schema(steps)}
        assert a.stats()["response_format_fallbacks"] == 1 and other.stats()["response_format_fallbacks"] == 0
        make(srv, model="another-model").analyze(trajs(1)[0])    # memory is per (endpoint, model)
        assert srv.requests[-2]["body"]["response_format"]["type"] == "json_schema"


def test_json_schema_refused_with_a_500_steps_down_like_a_422():
    """llama-cpp-python 0.3.36 refuses json_schema with HTTP 500 and a pydantic body naming response_format: one
    step down to json_object, counted once, not five retries of the same request; a 500 naming no field is retried."""
    with server(default="prose", response_formats=("text", "json_object"), format_status=500) as srv:
        a = make(srv)
        first, second = a.analyze(trajs(1)[0]), a.analyze(trajs(1)[0])
        assert first.ok and first.attempts == 2 and second.ok and second.attempts == 1
        assert [r["body"]["response_format"]["type"] for r in srv.requests] == ["json_schema", "json_object",
                                                                                  "json_object"]
        assert a.stats()["response_format_fallbacks"] == 1
    with server(modes=("error500",), default="good") as srv:
        ok = make(srv).analyze(trajs(1)[0])
        assert ok.ok and len(srv.requests) == 2 and srv.requests[1]["body"]["response_format"]["type"] == "json_schema"


def test_ignored_response_format_is_detected_and_dropped_lenient_parser_kept():
    with server(default="fenced") as srv:      # ignores response_format; answers JSON in a fence
        a = make(srv)
        results = [a.analyze(t) for t in trajs(8)]
        assert all(r.ok and r.attempts == 1 for r in results)

        def kind(body):
            rf = body.get("response_format")
            return None if rf is None else rf["type"] + ("+schema" if "schema" in rf else "")

        kinds = [kind(r["body"]) for r in srv.requests]
        assert kinds == ["json_schema", "json_schema", "json_object+schema", "json_object+schema", "json_object",
                         "json_object", None, None]
        st = a.stats()
        assert st["response_format_ignored"] == 6 and st["response_format_fallbacks"] == 3


def test_config_errors_name_the_field():
    for bad, match in ((dict(response_format="yaml"), "response_format='yaml'"),
                       (dict(token_limit_param="n_predict"), "token_limit_param"),
                       (dict(max_concurrent_requests=0), "max_concurrent_requests"),
                       (dict(abandoned_hold_s=-1), "abandoned_hold_s")):
        with pytest.raises(ValueError, match=match):
            make_analyzer("openai", base_url="http://127.0.0.1:9/v1", **bad)


# ---- concurrency and timeouts ----------------------------------------------------------------
def _run_pool(analyzers, items, workers=4):
    pools = [AnalyzerPool(a, num_workers=workers) for a in analyzers]
    futs = [pools[i % len(pools)].submit(t) for i, t in enumerate(items)]
    out = [f.result(timeout=60) for f in futs]
    for p in pools:
        p.close()
    return out, pools


def test_one_slot_server_capped_at_one_request_never_times_out():
    """The llama.cpp failure: 4 threads send at once, a one-slot server serves them in turn, the
    last ones time out in its queue and every retry queues again. Capped at 1, none times out."""
    with server(slots=1, work_s=0.3) as srv:
        a1, a2 = make(srv, timeout_s=1.0, max_concurrent_requests=1), make(srv, timeout_s=1.0,
                                                                           max_concurrent_requests=1)
        results, pools = _run_pool([a1, a2], trajs(8))
        assert all(r.ok and r.attempts == 1 for r in results)
        assert srv.max_in_flight == 1 and a1.stats()["timeouts"] == a2.stats()["timeouts"] == 0
        assert a1.stats()["slot_wait_s"] + a2.stats()["slot_wait_s"] > 1.0     # they queued here instead
        st = pools[0].stats()
        assert st["requests"] == 4 and st["timeouts"] == 0 and st["calls"] == 4
    with server(slots=1, work_s=0.3) as srv:   # the same load without the cap: timeouts
        a = make(srv, timeout_s=1.0, max_concurrent_requests=8, max_retries=1)
        results, _ = _run_pool([a], trajs(8))
        assert a.stats()["timeouts"] > 0 and not all(r.ok for r in results)


@pytest.mark.parametrize("hold", [None, 0.0])
def test_retry_after_a_timeout_does_not_queue_behind_the_abandoned_request(hold):
    """A server that answers unstreamed (it ignores "stream") and finishes abandoned requests, as llama.cpp does
    without streaming. The first request takes 3.25 s on its one slot (timeout 1.5 s). Holding its slot until the
    server is done (the default: one more timeout before any speed is measured) lets every analysis succeed after
    that single timeout, and no request reaches the server while it still generates the abandoned one; freeing
    the slot at once (hold 0) sends the next request into the busy server, where it queues and times out too.

    Timings: with hold 0 the next request, sent at the first timeout (1.5 s), ends at 2.8 + 0.5 = 3.3 s, past its
    own timeout at 3.0 s; with the hold it is sent at 3.0 s, after the slow answer ended at 2.8 s. A loaded
    machine only makes the client later, which keeps the hold's case. (At 1.0 / 1.9 / 0.4 s the slack was 0.3 s,
    and a first timeout that fired late once let hold 0's retry succeed.)"""
    with server(slots=1, work_s=0.5, slow_s=2.8, streams=False) as srv:
        srv.push("slow")
        a = make(srv, timeout_s=1.5, max_concurrent_requests=1, max_retries=3, abandoned_hold_s=hold)
        t0 = time.monotonic()
        results, _ = _run_pool([a], trajs(4))
        if hold is None:
            assert all(r.ok for r in results) and a.stats()["timeouts"] == 1
            assert sorted(r.attempts for r in results) == [1, 1, 1, 2]
            assert srv.queued_behind_abandoned == 0
            assert time.monotonic() - t0 < 8.0  # about 5 s: the hold, then 4 x 0.5 s
        else:
            assert a.stats()["timeouts"] >= 2 and srv.queued_behind_abandoned >= 1


def test_a_streamed_answer_abandoned_at_the_timeout_stops_on_the_server():
    """The runaway: one answer would take 20 s on a one-slot server that streams and stops when the client leaves
    (llama.cpp, vLLM). The client gives up at 1.5 s and closes the connection; the server stops within a word, so
    the retry and the other analyses run at once, none queued behind the abandoned generation, and the server is
    idle right after the last analysis."""
    with server(slots=1, work_s=0.3, slow_s=20.0) as srv:
        srv.push("slow")
        a = make(srv, timeout_s=1.5, max_concurrent_requests=1, max_retries=3)
        t0 = time.monotonic()
        results, _ = _run_pool([a], trajs(4))
        done = time.monotonic()
        assert all(r.ok for r in results) and a.stats()["timeouts"] == 1
        assert srv.queued_behind_abandoned == 0 and srv.generating == []
        assert done - t0 < 6.0            # about 1.5 + 4 x 0.3 s, against 20 s behind the runaway
        assert srv.busy_until <= done + 0.05
        assert all(r["body"]["stream"] is True for r in srv.requests)


def test_abandoned_hold_waits_for_the_measured_speed_not_a_whole_timeout():
    """Unstreamed: once an answer was measured, an abandoned request's slot is held until the server would have
    written the cap at that speed, not for a fixed timeout."""
    ep = endpoint_for("http://127.0.0.1:9/hold-test", 1)
    assert ep.finish_estimate_s("m", 1000, 1.0, default_s=60.0, streamed=False) == 60.0   # nothing measured yet
    ep.note_answer("m", "x" * 300, 100, 200, 2.0, streamed=False)                         # 100 tokens/s
    assert ep.finish_estimate_s("m", 1000, 1.0, default_s=60.0, streamed=False) == pytest.approx(9.0)
    assert ep.finish_estimate_s("m", 1000, 1.0, default_s=60.0, streamed=True) == pytest.approx(9.0)  # ignores it
    ep.note_answer("m", "x" * 300, 100, 200, 2.0, streamed=True)
    assert ep.finish_estimate_s("m", 1000, 1.0, default_s=60.0, streamed=True) == 0.0


def test_slot_limiter_holds_and_endpoints_are_shared():
    lim = SlotLimiter(1)
    assert lim.acquire() < 0.01
    lim.release(hold_s=0.3)
    assert lim.in_use == 1
    assert 0.25 < lim.acquire() < 1.0          # woke at the hold's expiry, no release needed
    lim.release()
    assert lim.in_use == 0
    e1, e2 = endpoint_for("http://127.0.0.1:1/v1/", 4), endpoint_for("http://127.0.0.1:1/v1", 2)
    assert e1 is e2 and e1.limiter.capacity == 2


def test_rejected_field_reads_real_error_shapes():
    sent = ("max_tokens", "max_completion_tokens", "response_format")
    openai_400 = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                  "Use 'max_completion_tokens' instead.")
    assert rejected_field(openai_400, None, sent) == "max_tokens"
    assert rejected_field(openai_400, "max_tokens", sent) == "max_tokens"
    assert rejected_field("Unrecognized request argument supplied: max_completion_tokens", None, sent) == \
        "max_completion_tokens"
    pyd = "{'detail': [{'loc': ['body', 'response_format', 'type'], 'msg': \"Input should be 'text'\"}]}"
    assert rejected_field(pyd, None, sent) == "response_format"
    assert rejected_field("json_schema is not supported", None, sent) == "response_format"
    assert rejected_field("temperature must be <= 2", "temperature", sent) is None


# ---- the answer cap's default, the context, reasoning tokens (answer_cap.py) -------------------
def test_default_cap_is_read_off_the_answer_shape_and_bounds_a_runaway():
    from opid_rllib.analyzer.answer_cap import default_answer_cap

    assert [default_answer_cap(k) for k in (0, 1, 2, 5)] == [384, 512, 640, 1024]
    with server(default="prose", honours=("max_tokens",)) as srv:   # 600 words of prose: the runaway
        make(srv, response_format="none", parse_retries=1, max_step_skills=2).analyze(trajs(1)[0])
        (content, finish), = srv.replies
        assert srv.requests[0]["body"]["max_tokens"] == 640 and finish == "stop" and len(content.split()) == 600
        srv.replies.clear()
        make(srv, response_format="none", parse_retries=1, max_step_skills=0).analyze(trajs(1)[0])
        assert srv.replies[0][1] == "length" and len(srv.replies[0][0].split()) == 384


def test_a_context_refusal_fits_the_cap_and_is_remembered():
    """llama-cpp-python's, vLLM's and OpenAI's 400 "maximum context length is N tokens ... (P in the messages"):
    the cap becomes what N leaves after P, at once, and the next analysis sends a fitted cap first time."""
    with server(n_ctx=900) as srv:
        a = make(srv, max_retries=1)
        first, second = a.analyze(trajs(1)[0]), a.analyze(trajs(1)[0])
        assert first.ok and first.attempts == 2 and second.ok and second.attempts == 1
        caps = [r["body"]["max_tokens"] for r in srv.requests]
        words = len(srv.requests[0]["body"]["messages"][0]["content"].split())
        assert caps[0] > 900 - words and all(c <= 900 - words for c in caps[1:])
        assert a.stats()["context_refusals"] == 1


def test_a_known_context_fits_the_cap_without_a_refusal_and_no_room_is_not_retried():
    with server(n_ctx=1200) as srv:   # before any answer, a prompt token is taken as 3 characters (over-counting)
        ok = make(srv, context_tokens=1200, max_retries=3).analyze(trajs(1)[0])
        prompt = srv.requests[0]["body"]["messages"][0]["content"]
        assert ok.ok and ok.attempts == 1 and srv.requests[0]["body"]["max_tokens"] == 1200 - len(prompt) // 3 - 1 - 32
    with server() as srv:
        s = make(srv, context_tokens=128, max_retries=3).analyze(trajs(1)[0])
        assert not s.ok and s.attempts == 0 and "context" in s.error and srv.requests == []


def test_an_empty_answer_cut_at_the_cap_doubles_it_for_the_endpoint():
    """A reasoning model spends hidden tokens inside the cap; with 1,500 of them a 1,024 cap leaves no answer
    (empty content, finish_reason "length"): the cap doubles at once, not counting as a retry, and stays doubled."""
    with server(hidden_tokens=1500) as srv:
        a = make(srv, max_retries=1)
        first, second = a.analyze(trajs(1)[0]), a.analyze(trajs(1)[0])
        assert first.ok and first.attempts == 2 and second.ok and second.attempts == 1
        caps = [r["body"]["max_tokens"] for r in srv.requests]
        assert caps == [caps[0], 2 * caps[0], 2 * caps[0]] and a.stats()["token_cap_raises"] == 1
    with server(hidden_tokens=100_000) as srv:     # never enough: x8 at most, then a failure
        s = make(srv, max_retries=1).analyze(trajs(1)[0])
        assert not s.ok and "empty" in s.error
        assert [r["body"]["max_tokens"] // srv.requests[0]["body"]["max_tokens"] for r in srv.requests][:4] == [1, 2,
                                                                                                                  4, 8]


def test_a_server_that_refuses_stream_gets_unstreamed_requests_from_then_on():
    with server(rejects={"stream": 422}) as srv:
        a = make(srv)
        first, second = a.analyze(trajs(1)[0]), a.analyze(trajs(1)[0])
        assert first.ok and first.attempts == 2 and second.ok and second.attempts == 1
        assert ["stream" in r["body"] for r in srv.requests] == [True, False, False]
        assert a.stats()["stream_fallbacks"] == 1
    with server(rejects={"stream": 422}) as srv:   # stream=True is the user's word: no step-down
        s = make(srv, stream=True, max_retries=1).analyze(trajs(1)[0])
        assert not s.ok and "422" in s.error
