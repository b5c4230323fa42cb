"""A real HTTP server speaking the OpenAI chat-completions wire format, on 127.0.0.1.

Why not a mock: the analyzer's transport (official `openai` client, timeouts, status codes,
backoff) is exercised end to end. Each request consumes the next scripted mode (else `default`):
  good      200, a valid analysis JSON built from the prompt's candidate steps
  fenced    200, the same JSON inside a ```json fence with prose around it
  junk      200, text without any JSON object
  nested    200, '{"episode_skill": ' 1,500 times: nested past Python's recursion limit
  empty     200, empty content
  error500  500 with an OpenAI-style error body
  slow      waits `slow_s` seconds, then answers like `good` (to trip client timeouts)
  trickle   answers like `good`, its body led by blanks sent one every 0.2 s for `slow_s` seconds (a
            proxy's keep-alive: no single read waits long, the whole answer does)
  echo_auth 401 whose body echoes the Authorization header (to test key redaction)
  prose     200, like a small model: the JSON analysis only when the request asked for a
            response_format type the server honours, else 600 words of prose
Server quirks, to emulate real OpenAI-compatible servers:
  honours          the answer-length fields obeyed ("tokens" = whitespace words; the answer is cut
                   and finish_reason is "length"); llama-cpp-python obeys only max_tokens
  rejects          {field: 400 | 422}: a request carrying that field gets OpenAI's 400
                   "unsupported_parameter" or a pydantic 422 body naming it
  response_formats None = `response_format` is ignored; a tuple = the types honoured, any other
                   type gets a pydantic body naming the field, with HTTP `format_status` (422; llama-cpp-python
                   0.3.36 sends it as a 500, and knows only text and json_object)
  slots, work_s    a server with `slots` generation slots, each request taking `work_s` (slow
                   requests `slow_s`) inside a slot; like llama.cpp it finishes unstreamed requests whose
                   client already gave up (`max_in_flight` records the most running at once)
  streams          True: a request with "stream": true is answered as server-sent events, one word per event
                   spread over the request's work time, and, like llama.cpp and vLLM, the generation stops when
                   the client closes the connection (`stops_on_disconnect`); False: such requests get one
                   JSON body, like a server that ignores the field
  n_ctx            a context of that many words: a request whose prompt words plus cap exceed it gets
                   llama-cpp-python's 400 "maximum context length" body
  hidden_tokens    a reasoning model: that many hidden words count against the cap first; a cap that leaves
                   no room for the answer gets empty content and finish_reason "length"
What it is generating is reported: `generating` holds the running generations ({"abandoned": bool, ...}; an
unstreamed one is marked abandoned when its client closes the socket), `queued_behind_abandoned` counts
requests that arrived while an abandoned generation still ran, `busy_until` is when the last one ended.
Every request is recorded (path, headers, JSON body) in `server.requests`, every 200 answer as
(content, finish_reason) in `server.replies`.

Also usable stand-alone for benchmarks:
  python tests/analyzer/fake_openai_server.py --port 8011 --delay 0.5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import select
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

MODES = ("good", "fenced", "junk", "nested", "empty", "error500", "slow", "trickle", "echo_auth", "prose")
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
PROSE = " ".join(["The agent looked around the room and then walked to the counter."] * 50)


def default_content(prompt: str) -> str:
    """A plausible analysis: skills for the first two candidate steps of the prompt."""
    m = re.search(r"Candidate steps: \[([0-9, ]*)\]", prompt)
    cands = [int(x) for x in m.group(1).split(",") if x.strip()] if m else []
    return json.dumps({
        "episode_summary": "The agent explored, then finished the task.",
        "episode_skill": "Go straight to the target receptacle, take the object, then place it.",
        "step_skills": {str(i): f"At step {i}, act on the goal object directly." for i in cands[:2]},
    })


def _rejection(fld: str, status: int, value: Any = None) -> dict:
    """Error bodies as real servers send them: OpenAI's 400 and FastAPI/pydantic's 422."""
    if status == 422:
        return {"detail": [{"type": "literal_error" if value else "extra_forbidden", "loc": ["body", fld],
                            "msg": "Input should be 'text' or 'json_object'" if value else
                            "Extra inputs are not permitted", "input": value}]}
    return {"error": {"message": f"Unsupported parameter: '{fld}' is not supported with this model. "
                                 + ("Use 'max_completion_tokens' instead." if fld == "max_tokens" else ""),
                      "type": "invalid_request_error", "param": fld, "code": "unsupported_parameter"}}


def _closed(conn: socket.socket) -> bool:
    """Did the client close this connection (readable with nothing to read)?"""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _context_refusal(n_ctx: int, prompt_tokens: int, cap: int) -> dict:
    """llama-cpp-python's (and OpenAI's, vLLM's) words for a request that does not fit the context."""
    return {"error": {"message": f"This model's maximum context length is {n_ctx} tokens. However, you requested "
                                 f"{prompt_tokens + cap} tokens ({prompt_tokens} in the messages, {cap} in the "
                                 "completion). Please reduce the length of the messages or completion.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


class FakeOpenAIServer:
    def __init__(self, modes: tuple[str, ...] | list[str] = (), default: str = "good", delay_s: float = 0.0,
                 slow_s: float = 5.0, content: Callable[[str], str] | None = None,
                 host: str = "127.0.0.1", port: int = 0, honours: tuple[str, ...] = TOKEN_FIELDS,
                 rejects: dict[str, int] | None = None, response_formats: tuple[str, ...] | None = None,
                 slots: int | None = None, work_s: float = 0.0, format_status: int = 422, streams: bool = True,
                 stops_on_disconnect: bool = True, n_ctx: int | None = None, hidden_tokens: int = 0):
        for mode in (*modes, default):
            if mode not in MODES:
                raise ValueError(f"mode={mode!r}: unknown; choices {MODES}")
        self.default = default
        self.delay_s = float(delay_s)
        self.slow_s = float(slow_s)
        self.content = content or default_content
        self.requests: list[dict[str, Any]] = []
        self.replies: list[tuple[str, str]] = []
        self.honours = tuple(honours)
        self.rejects = dict(rejects or {})
        self.response_formats = None if response_formats is None else tuple(response_formats)
        self.format_status = int(format_status)
        self.work_s = float(work_s)
        self.streams, self.stops_on_disconnect = bool(streams), bool(stops_on_disconnect)
        self.n_ctx, self.hidden_tokens = n_ctx, int(hidden_tokens)
        self.generating: list[dict[str, bool]] = []
        self.queued_behind_abandoned = 0
        self.busy_until = 0.0
        self._slots = threading.Semaphore(slots) if slots else None
        self.in_flight = 0
        self.max_in_flight = 0
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

    def _work(self, seconds: float, conn: socket.socket, emit: Callable[[int], bool] | None = None,
              steps: int = 1) -> bool:
        """Hold a generation slot for `seconds`, in `steps` equal parts with `emit(i)` after each (a streamed
        word; False = the client is gone). An unstreamed generation runs to its end whether or not the client
        still waits, as llama.cpp's does, and is marked abandoned when its client closes. False on stop."""
        if self._slots is not None:
            while not self._slots.acquire(timeout=0.05):
                if self._stop.is_set():
                    return False
        gen = {"abandoned": False, "conn": conn, "streamed": emit is not None}
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.generating.append(gen)
        try:
            for i in range(max(1, steps)):
                end = time.monotonic() + seconds / max(1, steps)
                while (left := end - time.monotonic()) > 0:
                    if self._stop.wait(min(left, 0.05)):
                        return False
                    gen["abandoned"] = gen["abandoned"] or (emit is None and _closed(conn))
                if emit is not None and not gen["abandoned"] and not emit(i):
                    gen["abandoned"] = True
                    if self.stops_on_disconnect:
                        return True
            return True
        finally:
            with self._lock:
                self.in_flight -= 1
                self.generating.remove(gen)
                self.busy_until = time.monotonic()
            if self._slots is not None:
                self._slots.release()

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

            def _send(self, status: int, payload: dict, trickle_s: float = 0.0) -> None:
                blanks = int(trickle_s / 0.2)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(blanks + len(data)))
                    self.end_headers()
                    for _ in range(blanks):  # JSON allows leading whitespace
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        if server._stop.wait(0.2):
                            return
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
                    server.queued_behind_abandoned += any(g["abandoned"] or (not g["streamed"] and _closed(g["conn"]))
                                                          for g in server.generating)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                for fld, status in server.rejects.items():
                    if fld in body:
                        self._send(status, _rejection(fld, status))
                        return
                rf = body.get("response_format")
                rf_type = rf.get("type") if isinstance(rf, dict) else None
                if rf_type and server.response_formats is not None and rf_type not in server.response_formats:
                    self._send(server.format_status, _rejection("response_format", 422, rf_type))
                    return
                prompt = ""
                for msg in body.get("messages") or []:
                    if isinstance(msg, dict) and msg.get("role") == "user":
                        prompt = str(msg.get("content") or "")
                cap = min((int(body[f]) for f in server.honours if isinstance(body.get(f), int)), default=None)
                if server.n_ctx and cap and len(prompt.split()) + cap > server.n_ctx:
                    self._send(400, _context_refusal(server.n_ctx, len(prompt.split()), cap))
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
                structured = rf_type is not None and rf_type in (server.response_formats or ())
                if mode in ("good", "slow", "trickle") or (mode == "prose" and structured):
                    content = server.content(prompt)
                elif mode == "prose":
                    content = PROSE
                elif mode == "fenced":
                    content = f"Here is the analysis:\n```json\n{server.content(prompt)}\n```\nDone."
                elif mode == "junk":
                    content = "Sorry, I cannot analyze this episode right now."
                elif mode == "nested":
                    content = '{"episode_skill": ' * 1500
                else:
                    content = ""
                words = content.split(" ")
                finish = "stop"
                if cap is not None and server.hidden_tokens:     # hidden reasoning words are written first
                    cap = max(0, cap - server.hidden_tokens)
                if cap is not None and len(words) > cap:
                    words, finish = words[:cap], "length"
                    content = " ".join(words)
                work = server.slow_s if mode == "slow" else server.work_s
                if body.get("stream") and server.streams:
                    self._stream(content, finish, work, body.get("model", "fake"),
                                 trickle_s=server.slow_s if mode == "trickle" else 0.0)
                    return
                if server._slots is not None or mode == "slow":
                    if not server._work(work, self.connection):
                        return
                with server._lock:
                    server.replies.append((content, finish))
                self._send(200, {
                    "id": f"chatcmpl-fake-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": finish,
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split()),
                              "total_tokens": len(prompt.split()) + len(content.split())},
                }, trickle_s=server.slow_s if mode == "trickle" else 0.0)

            def _stream(self, content: str, finish: str, work_s: float, model: str, trickle_s: float) -> None:
                """Server-sent events, one word each, spread over `work_s` inside a slot, after `trickle_s` of
                keep-alive comments (": ping" every 0.2 s); stops when the client leaves (if the server does)."""
                words = content.split(" ") if content else []
                sent: list[str] = []

                def event(payload: dict) -> bool:
                    try:
                        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                        self.wfile.flush()
                        return True
                    except (BrokenPipeError, ConnectionResetError, OSError):
                        return False

                def chunk(delta: dict, reason: str | None = None) -> dict:
                    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}

                def emit(i: int) -> bool:
                    if i >= len(words):
                        return True
                    piece = words[i] if i == 0 else " " + words[i]
                    sent.append(piece)
                    return event(chunk({"content": piece}))

                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                except (BrokenPipeError, ConnectionResetError):
                    return
                for _ in range(int(trickle_s / 0.2)):
                    try:
                        self.wfile.write(b": ping\n\n")
                        self.wfile.flush()
                    except OSError:
                        return
                    if server._stop.wait(0.2):
                        return
                if not event(chunk({"role": "assistant"})):
                    return
                if not server._work(work_s, self.connection, emit, steps=max(1, len(words))):
                    return
                if len(sent) == len(words) and event(chunk({}, finish)):
                    with server._lock:
                        server.replies.append(("".join(sent), finish))
                    with contextlib.suppress(OSError):
                        self.wfile.write(b"data: [DONE]\n\n")

        return Handler


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released): a server that is not there."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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
