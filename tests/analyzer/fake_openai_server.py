"""A real HTTP server speaking the OpenAI chat-completions wire format, on 127.0.0.1.

Why not a mock: the analyzer's transport (official `openai` client, timeouts, status codes,
backoff) is exercised end to end. Each request consumes the next scripted mode (else `default`):
  good      200, a valid analysis JSON built from the prompt's candidate steps
  fenced    200, the same JSON inside a ```json fence with prose around it
  junk      200, text without any JSON object
  empty     200, empty content
  error500  500 with an OpenAI-style error body
  slow      waits `slow_s` seconds, then answers like `good` (to trip client timeouts)
  echo_auth 401 whose body echoes the Authorization header (to test key redaction)
Every request is recorded (path, headers, JSON body) in `server.requests`.

Also usable stand-alone for benchmarks:
  python tests/analyzer/fake_openai_server.py --port 8011 --delay 0.5
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

MODES = ("good", "fenced", "junk", "empty", "error500", "slow", "echo_auth")


def default_content(prompt: str) -> str:
    """A plausible analysis: skills for the first two candidate steps of the prompt."""
    m = re.search(r"Candidate steps: \[([0-9, ]*)\]", prompt)
    cands = [int(x) for x in m.group(1).split(",") if x.strip()] if m else []
    return json.dumps({
        "episode_summary": "The agent explored, then finished the task.",
        "episode_skill": "Go straight to the target receptacle, take the object, then place it.",
        "step_skills": {str(i): f"At step {i}, act on the goal object directly." for i in cands[:2]},
    })


class FakeOpenAIServer:
    def __init__(self, modes: tuple[str, ...] | list[str] = (), default: str = "good", delay_s: float = 0.0,
                 slow_s: float = 5.0, content: Callable[[str], str] | None = None,
                 host: str = "127.0.0.1", port: int = 0):
        for mode in (*modes, default):
            if mode not in MODES:
                raise ValueError(f"mode={mode!r}: unknown; choices {MODES}")
        self.default = default
        self.delay_s = float(delay_s)
        self.slow_s = float(slow_s)
        self.content = content or default_content
        self.requests: list[dict[str, Any]] = []
        self._modes: deque[str] = deque(modes)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- control --------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *modes: str) -> None:
        with self._lock:
            self._modes.extend(modes)

    def start(self) -> "FakeOpenAIServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in "slow" mode
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _next_mode(self) -> str:
        with self._lock:
            return self._modes.popleft() if self._modes else self.default

    # ---- HTTP -----------------------------------------------------------------------------
    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout); nothing to do

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                with server._lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                mode = server._next_mode()
                if server.delay_s:
                    server._stop.wait(server.delay_s)
                if mode == "error500":
                    self._send(500, {"error": {"message": "internal error (fake)", "type": "server_error"}})
                    return
                if mode == "echo_auth":
                    auth = self.headers.get("Authorization", "")
                    self._send(401, {"error": {"message": f"Incorrect API key provided: {auth}",
                                               "type": "invalid_request_error", "code": "invalid_api_key"}})
                    return
                if mode == "slow" and server._stop.wait(server.slow_s):
                    return
                prompt = ""
                for msg in body.get("messages") or []:
                    if isinstance(msg, dict) and msg.get("role") == "user":
                        prompt = str(msg.get("content") or "")
                if mode in ("good", "slow"):
                    content = server.content(prompt)
                elif mode == "fenced":
                    content = f"Here is the analysis:\n```json\n{server.content(prompt)}\n```\nDone."
                elif mode == "junk":
                    content = "Sorry, I cannot analyze this episode right now."
                else:
                    content = ""
                self._send(200, {
                    "id": f"chatcmpl-fake-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                              "total_tokens": (len(prompt) + len(content)) // 4},
                })

        return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds of latency per request")
    ap.add_argument("--mode", default="good", choices=MODES)
    args = ap.parse_args()
    srv = FakeOpenAIServer(default=args.mode, delay_s=args.delay, port=args.port).start()
    print(f"fake OpenAI server on {srv.base_url} (mode={args.mode}, delay={args.delay}s); Ctrl-C to stop")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
