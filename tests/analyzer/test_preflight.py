"""An openai/azure analyzer's key and server are checked before Ray starts, against real sockets: a closed port on
127.0.0.1 and a tiny HTTP server that answers. No mocks: the probe is what a user's run does."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from opid_rllib.analyzer.preflight import analyzer_setup_error, probe, shown_url
from tests.analyzer.fake_openai_server import closed_port

SECRET = "sk-test-preflight-secret-123456"


class _Answer404(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.server.paths.append(self.path)
        self.server.auth.append(self.headers.get("Authorization"))
        self.send_response(404)
        self.end_headers()

    def log_message(self, *a):  # quiet
        pass


@pytest.fixture
def http_server():
    srv = HTTPServer(("127.0.0.1", 0), _Answer404)
    srv.paths, srv.auth = [], []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_no_key_and_no_base_url_names_the_variable():
    err = analyzer_setup_error("openai", {}, environ={})
    assert err == ("--analyzer openai: no API key; OPENAI_API_KEY is not set: export it (or OPENAI_BASE_URL for a "
                   "local server that needs none)")
    assert "MY_KEY" in analyzer_setup_error("openai", {"api_key_env": "MY_KEY"}, environ={"OPENAI_API_KEY": "x"})
    assert analyzer_setup_error("openai", {}, environ={"OPENAI_API_KEY": SECRET}) is None  # api.openai.com: no probe
    assert analyzer_setup_error("hindsight", {}, environ={}) is None


def test_azure_needs_a_base_url_and_a_key(http_server):
    assert "--analyzer azure: no base URL" in analyzer_setup_error("azure", {}, environ={"OPENAI_API_KEY": SECRET})
    url = f"http://127.0.0.1:{http_server.server_port}/v1"
    assert "no API key; OPENAI_API_KEY" in analyzer_setup_error("azure", {}, environ={"OPENAI_BASE_URL": url})
    assert analyzer_setup_error("azure", {"base_url": url}, environ={"OPENAI_API_KEY": SECRET}) is None


def test_a_closed_port_is_one_line_in_seconds_without_the_key():
    url = f"http://user:pw@127.0.0.1:{closed_port()}/v1?token={SECRET}"
    t0 = time.perf_counter()
    err = analyzer_setup_error("openai", {}, environ={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": SECRET})
    assert time.perf_counter() - t0 < 3.5
    assert err.startswith("--analyzer openai: base URL http://127.0.0.1:") and "(OPENAI_BASE_URL)" in err
    assert "connection refused" in err and "\n" not in err
    assert SECRET not in err and "pw" not in err and "user" not in err


def test_a_server_that_answers_passes_even_with_404(http_server):
    url = f"http://127.0.0.1:{http_server.server_port}/v1"
    assert probe(url) is None
    # a local server needs no key; the option names the URL instead of the environment variable
    assert analyzer_setup_error("openai", {"base_url": url}, environ={}) is None
    assert analyzer_setup_error("openai", {}, environ={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": SECRET}) is None
    assert http_server.paths == ["/v1/models"] * 3 and http_server.auth == [None] * 3  # the key is never sent


def test_a_server_that_never_answers_times_out():
    """A listening socket that never replies: the probe gives up after its timeout."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        t0 = time.perf_counter()
        assert probe(f"http://127.0.0.1:{s.getsockname()[1]}", timeout_s=0.5) == "no answer within 0.5 s"
        assert time.perf_counter() - t0 < 3
    finally:
        s.close()


def test_shown_url_drops_user_and_query():
    assert shown_url("https://u:p@host.example:8443/v1?key=abc") == "https://host.example:8443/v1"
    assert probe("localhost:8000") == "not an http(s) URL"
