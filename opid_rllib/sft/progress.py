"""Throttled progress lines (step/total, loss, elapsed, ETA) for long loops.

Why: the warm start used to print nothing for 20-40 minutes; a user could not tell a slow run
from a hung one. Lines go to stderr at most every `every_s` seconds (and on the last step).
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from opid_rllib.progress import fmt_s  # noqa: F401  (re-exported: the warm start's callers import it here)


def eta_s(done: int, total: int, elapsed: float) -> float | None:
    """Remaining seconds at the mean pace so far (None before the first step)."""
    if done <= 0 or elapsed <= 0:
        return None
    return elapsed / done * max(0, total - done)


class Progress:
    """`update(step, loss=...)` prints `[prefix] <unit> k/N (p%) loss x | elapsed | ETA` when due.

    `start_step` is where this process began (a resumed run): the pace counts only its own steps."""

    def __init__(self, total: int, *, prefix: str = "[opid-sft]", unit: str = "step", every_s: float = 10.0,
                 start_step: int = 0,
                 write: Callable[[str], None] | None = None, clock: Callable[[], float] = time.perf_counter):
        self.total, self.prefix, self.unit = int(total), prefix, unit
        self.every_s, self.start_step = float(every_s), int(start_step)
        self.clock = clock
        self.write = write or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.t0 = clock()
        self.last = self.t0
        self.lines = 0

    def update(self, step: int, **fields: float) -> bool:
        now = self.clock()
        if self.every_s < 0 or (now - self.last < self.every_s and step < self.total):
            return False
        self.last = now
        elapsed = now - self.t0
        eta = eta_s(step - self.start_step, self.total - self.start_step, elapsed)
        extra = "".join(f" {k} {v:.4f}" if isinstance(v, float) else f" {k} {v}" for k, v in fields.items())
        self.write(f"{self.prefix} {self.unit} {step}/{self.total} ({100.0 * step / max(1, self.total):.0f}%){extra} | "
                   f"elapsed {fmt_s(elapsed)} | ETA {'?' if eta is None else fmt_s(eta)}")
        self.lines += 1
        return True
