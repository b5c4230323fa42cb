"""Built-in lexical retriever speaking the Search-R1 HTTP API (`POST /retrieve`).

Why: Search-R1 agents talk to an e5/FAISS server over wiki-18 that needs GPUs and tens of GB.
Serving the same wire format from a BM25 index (bm25s) over a small local corpus lets the env,
tests and CI exercise the real HTTP path offline; switching to a user's e5 server is only a URL.

Request:  {"queries": [str, ...], "topk": int, "return_scores": bool}
Response: {"result": [[{"document": {"id", "contents"}, "score": float}, ...], ...]}
          (without return_scores, each hit is the bare document, as in Search-R1).

Run standalone: python -m envs.searchqa.retriever_server --port 8000 [--corpus_file wiki.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable, Sequence

MAX_QUERIES = 4096   # per request; protects the server from a runaway batch
MAX_TOPK = 100


class BM25Index:
    """bm25s index over Search-R1 documents ({"id", "contents"}), English stopwords, no stemmer."""

    def __init__(self, docs: Sequence[dict]):
        import bm25s
        from bm25s.tokenization import Tokenizer

        if not docs:
            raise ValueError("BM25Index: empty corpus")
        self.docs = [{"id": str(d["id"]), "contents": str(d["contents"])} for d in docs]
        self._tok = Tokenizer(stopwords="en")
        ids = self._tok.tokenize([d["contents"] for d in self.docs], return_as="ids", show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(ids, show_progress=False)
        # bm25s does not document thread safety; the HTTP server is threaded, so serialise.
        self._lock = threading.Lock()

    def search(self, queries: Sequence[str], topk: int = 3) -> list[list[tuple[dict, float]]]:
        """Top-k (document, score) per query; zero-score hits (no shared term) are dropped."""
        if not queries:
            return []
        k = max(1, min(int(topk), len(self.docs)))
        with self._lock:
            q = self._tok.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
            idx, scores = self._bm25.retrieve(q, k=k, show_progress=False, n_threads=0)
        return [[(self.docs[int(i)], float(s)) for i, s in zip(row_i, row_s) if s > 0]
                for row_i, row_s in zip(idx, scores)]


def load_jsonl_corpus(path: str) -> list[dict]:
    """A Search-R1 corpus file (wiki-18.jsonl layout): one {"id", "contents"} object per line."""
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                docs.append({"id": d.get("id", len(docs)), "contents": d["contents"]})
    return docs


def synthetic_docs(seed: int | None = None) -> list[dict]:
    from .corpus import WORLD_SEED, build_world

    return [{"id": p.id, "contents": p.contents} for p in build_world(WORLD_SEED if seed is None else seed).passages]


def _make_handler(index: BM25Index):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive for clients that reuse connections
        # Headers and body go out in two writes; with Nagle on, the client's delayed ACK
        # stalls every reply by ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, *args):  # no per-request stderr noise
            pass

        def _send(self, code: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.rstrip("/") in ("", "/health"):
                self._send(200, {"status": "ok", "num_docs": len(index.docs), "retriever": "bm25s"})
            else:
                self._send(404, {"error": f"unknown path {self.path}; use POST /retrieve"})

        def do_POST(self):
            if self.path.rstrip("/") != "/retrieve":
                self._send(404, {"error": f"unknown path {self.path}; use POST /retrieve"})
                return
            try:
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                queries = req.get("queries")
                if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
                    raise ValueError('"queries" must be a list of strings')
                if len(queries) > MAX_QUERIES:
                    raise ValueError(f"{len(queries)} queries > {MAX_QUERIES} per request")
                topk = int(req.get("topk", 3))
                if not 1 <= topk <= MAX_TOPK:
                    raise ValueError(f"topk={topk} outside [1, {MAX_TOPK}]")
                scores = bool(req.get("return_scores", False))
            except (ValueError, TypeError, json.JSONDecodeError) as e:
                self._send(400, {"error": str(e)})
                return
            hits = index.search(queries, topk)
            result = [[{"document": d, "score": s} if scores else d for d, s in row] for row in hits]
            self._send(200, {"result": result})

    return Handler


class RetrieverServer:
    """A ThreadingHTTPServer on a daemon thread; port 0 picks a free port."""

    def __init__(self, index: BM25Index, host: str = "127.0.0.1", port: int = 0):
        self.index = index
        self.httpd = ThreadingHTTPServer((host, port), _make_handler(index))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="searchqa-retriever", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/retrieve"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


_SHARED: dict[str, RetrieverServer] = {}
_INDEXES: dict[str, BM25Index] = {}
_LOCK = threading.Lock()


def shared_index(corpus_file: str | None = None) -> BM25Index:
    """One BM25 index per corpus per process (indexing the synthetic corpus takes ~1 s)."""
    key = corpus_file or "synthetic"
    with _LOCK:
        if key not in _INDEXES:
            _INDEXES[key] = BM25Index(load_jsonl_corpus(corpus_file) if corpus_file else synthetic_docs())
        return _INDEXES[key]


def builtin_server_url(corpus_file: str | None = None) -> str:
    """Start (once per process and corpus) the built-in server on 127.0.0.1 and return its URL.

    Keyed by pid too: a forked child does not inherit the parent's serving thread.
    """
    key = f"{os.getpid()}:{corpus_file or 'synthetic'}"
    index = shared_index(corpus_file)
    with _LOCK:
        if key not in _SHARED:
            _SHARED[key] = RetrieverServer(index)
        return _SHARED[key].url


def main(argv: Iterable[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--corpus_file", default=None, help="Search-R1 jsonl corpus; default: synthetic world")
    args = ap.parse_args(list(argv) if argv is not None else None)
    server = RetrieverServer(shared_index(args.corpus_file), args.host, args.port)
    print(f"searchqa BM25 retriever: {len(server.index.docs)} docs at {server.url}", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
