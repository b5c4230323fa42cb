"""Thread pool that analyzes trajectories while the rollout goes on.

Why threads: the LLM analyzer is I/O bound (HTTP), so a few threads inside the env-runner actor
overlap its latency with the remaining rollout. Every Future resolves to `Skills`, never to an
exception, so the consumer needs no error handling beyond `skills.ok`.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from typing import Any

from opid_rllib.analyzer.base import Analyzer, Skills, TrajectoryRecord, short_error

log = logging.getLogger(__name__)


class AnalyzerPool:
    def __init__(self, analyzer: Analyzer, num_workers: int = 8):
        if int(num_workers) < 1:
            raise ValueError(f"analyzer num_workers={num_workers}: must be >= 1")
        self.analyzer = analyzer
        self.num_workers = int(num_workers)
        self._executor = cf.ThreadPoolExecutor(max_workers=self.num_workers, thread_name_prefix="opid-analyzer")
        self._lock = threading.Lock()
        self._closed = False
        self._calls = 0
        self._errors = 0
        self._latency_s = 0.0
        self._pending = 0

    def _run(self, traj: TrajectoryRecord) -> Skills:
        t0 = time.monotonic()
        try:
            skills = self.analyzer.analyze(traj)
            if not isinstance(skills, Skills):
                skills = Skills(error=f"analyzer returned {type(skills).__name__}, not Skills")
        except Exception as exc:  # analyze() never raises by contract: a subclass broke it; warned, counted in errors
            skills = Skills(error=short_error(self.analyzer._redact(f"{type(exc).__name__}: {exc}")))
            log.warning("%s analyzer raised (its analyze() must not): %s", self.analyzer.name, skills.error)
        if not skills.latency_s:
            skills.latency_s = time.monotonic() - t0
        with self._lock:
            self._calls += 1
            self._errors += skills.error is not None
            self._latency_s += skills.latency_s
            self._pending -= 1
        return skills

    def submit(self, traj: TrajectoryRecord) -> "cf.Future[Skills]":
        with self._lock:
            closed = self._closed
            if not closed:
                self._pending += 1
        if closed:
            fut: cf.Future = cf.Future()
            fut.set_result(Skills(error="analyzer pool is closed"))
            return fut
        try:
            return self._executor.submit(self._run, traj)
        except RuntimeError as exc:  # executor shut down concurrently
            with self._lock:
                self._pending -= 1
            fut = cf.Future()
            fut.set_result(Skills(error=short_error(exc)))
            return fut

    def stats(self) -> dict[str, Any]:
        """Counters for metrics: calls finished, errors, total and mean latency, queued/running,
        plus the analyzer's own cumulative counters (OpenAIAnalyzer: requests, timeouts, slot wait,
        structured-output and token-field fallbacks)."""
        try:
            extra = {k: v for k, v in (self.analyzer.stats() or {}).items() if isinstance(v, (int, float))}
        except Exception:  # metrics must never break a rollout
            extra = {}
        with self._lock:
            calls = self._calls
            return {
                **extra,
                "calls": calls,
                "errors": self._errors,
                "total_latency_s": self._latency_s,
                "mean_latency_s": self._latency_s / calls if calls else 0.0,
                "pending": self._pending,
            }

    @property
    def calls(self) -> int:
        return self.stats()["calls"]

    @property
    def errors(self) -> int:
        return self.stats()["errors"]

    @property
    def total_latency_s(self) -> float:
        return self.stats()["total_latency_s"]

    def close(self, wait: bool = True) -> None:
        """Stop accepting work. Queued trajectories still finish (their Futures must resolve)."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=False)

    def __enter__(self) -> "AnalyzerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AnalyzerPool({self.analyzer!r}, num_workers={self.num_workers})"
