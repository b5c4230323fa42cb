"""Progress lines for the long phases of a run: a training iteration's heartbeat and line-mode bars.

Why: a CPU training iteration takes a minute or more and printed nothing until it ended, and a tqdm bar piped
to a file or `tee` writes carriage returns, so a log showed nothing until the play ended.

The work posts where it is to `BOARD` (one dict per process: the env runner per generation step, the learner
per micro-batch, the re-scoring per micro-batch). `Heartbeat`, a daemon thread of the driver, prints one line
every `every_s` seconds with the phase, what the board says (when the runner or learner lives in the driver
process) and an ETA: from the board's pace, else from the previous iteration's length of that phase. Remote
runners and learners post to their own process's board, which the driver does not read: there the ETA comes
from the previous iteration (none on the first).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable


def fmt_s(seconds: float) -> str:
    """12s, 3m05s, 1h02m00s."""
    s = int(round(max(0.0, seconds)))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# What this process is doing now: {"what", "done", "total", "unit", "t0", "bound"}; "bound": total is a cap
# (e.g. max_steps), so the ETA is an upper bound.
BOARD: dict = {}


def post(what: str, done: int, total: int, unit: str = "", bound: bool = False) -> None:
    """Say where this process's work is; a new `what` restarts the pace clock."""
    if BOARD.get("what") != what or done < BOARD.get("done", 0):  # a new phase, or a new pass of the same one
        BOARD.clear()
        BOARD.update(what=what, t0=time.perf_counter())
    BOARD.update(done=int(done), total=int(total), unit=unit, bound=bool(bound))


def clear() -> None:
    BOARD.clear()


def board_text(board: dict | None = None) -> tuple[str, float | None]:
    """("step 12/30", ETA seconds or None) from a board (default this process's)."""
    b = dict(BOARD if board is None else board)
    if not b.get("what"):
        return "", None
    done, total = b.get("done", 0), b.get("total", 0)
    text = f"{b['what']} {done}/{total}{' ' + b['unit'] if b.get('unit') else ''}"
    eta = None
    if 0 < done <= total:
        eta = (time.perf_counter() - b["t0"]) / done * (total - done)
    return text, eta


def fmt_eta(eta: float | None, bound: bool = False) -> str:
    return "ETA ?" if eta is None else f"ETA {'<= ' if bound else '~'}{fmt_s(eta)}"


class Heartbeat:
    """A daemon thread that prints `[prefix] <label>: <phase> | <board> | <elapsed> in | ETA` every `every_s`.

    `phase(name)` moves it on; `previous` (phase -> seconds of the last run, the ETA when the board has none)
    is updated in place on exit with this run's `durations`. every_s <= 0: silent."""

    def __init__(self, label: str, every_s: float = 10.0, prefix: str = "[opid]", previous: dict | None = None,
                 write: Callable[[str], None] | None = None):
        self.label, self.every_s, self.prefix = label, float(every_s), prefix
        self.previous = {} if previous is None else previous
        self.durations: dict[str, float] = {}
        self.write = write or _to_stderr
        self._phase, self._t_phase = "", 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def phase(self, name: str) -> None:
        now = time.perf_counter()
        if self._phase:
            self.durations[self._phase] = self.durations.get(self._phase, 0.0) + now - self._t_phase
        self._phase, self._t_phase = name, now
        clear()

    def line(self) -> str:
        """`[opid] <label>: <phase>, <elapsed> in | <board>, ETA` (the board's ETA is for what it names)."""
        phase, now = self._phase, time.perf_counter()
        if not phase:  # between phases (the exit's phase("") included) there is nothing to say
            return ""
        in_phase = now - self._t_phase
        text, eta = board_text()
        if eta is not None:
            detail = f"{text}, {fmt_eta(eta, bool(BOARD.get('bound')))}"
        elif phase in self.previous:
            last = self.previous[phase]
            eta_text = f"{fmt_eta(max(0.0, last - in_phase))} (the last one took {fmt_s(last)})"
            detail = f"{text + ', ' if text else ''}{eta_text}"
        else:
            detail = f"{text + ', ' if text else ''}no ETA before the first iteration ends"
        return f"{self.prefix} {self.label}: {phase}, {fmt_s(in_phase)} in | {detail}"

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                line = self.line()
                if line:
                    self.write(line)
            except Exception:  # noqa: BLE001 - a progress line must never break training
                pass

    def __enter__(self) -> "Heartbeat":
        if self.every_s > 0:
            self._thread = threading.Thread(target=self._run, name="opid-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()  # first: a line printed mid-exit would name no phase
        self.phase("")
        self.durations.pop("", None)
        self.previous.update(self.durations)
        if self._thread is not None:
            self._thread.join(timeout=1.0)


def iteration_heartbeat(algo, what: str = "", phase: str = "") -> Heartbeat:
    """The heartbeat of an OPID algorithm's next iteration (or of `what` in it, e.g. its evaluation), every
    config.progress_interval_s seconds (0/None: silent); phase lengths are kept on the algorithm for the next ETA."""
    beat = Heartbeat(f"iteration {algo.iteration + 1}{' ' + what if what else ''}",
                     getattr(algo.config, "progress_interval_s", None) or 0,
                     previous=algo.__dict__.setdefault("_opid_phase_s", {}))
    if phase:
        beat.phase(phase)
    return beat


class LineBar:
    """tqdm's update/set_postfix_str/close for a log that is not a terminal: one line per `every_s` seconds
    (and at the end) instead of carriage-return redraws that a pipe shows only when the bar closes."""

    def __init__(self, total: int, desc: str, unit: str = "ep", every_s: float = 10.0,
                 write: Callable[[str], None] | None = None):
        self.total, self.desc, self.unit, self.every_s = int(total), desc, unit, float(every_s)
        self.n, self.postfix, self.fraction = 0, "", None
        self.write = write or _to_stderr
        self.t0 = self.last = time.perf_counter()
        self.shown = ""
        self._maybe_print(force=True)  # a line as the play starts: the first step can take a while

    def update(self, k: int = 1) -> None:
        self.n += k
        self._maybe_print()

    def set_postfix_str(self, s: str, refresh: bool = True) -> None:
        self.postfix = s
        self._maybe_print()

    def _maybe_print(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self.last < self.every_s:
            return
        self.last = now
        frac = self.fraction if self.fraction is not None else self.n / max(1, self.total)
        eta = (now - self.t0) / frac * (1 - frac) if 0 < frac <= 1 else None
        state = f"{self.desc}: {self.n}/{self.total} {self.unit}{', ' + self.postfix if self.postfix else ''}"
        if force and state == self.shown:
            return  # close() right after a line saying the same
        self.shown = state
        self.write(f"{state} | {fmt_s(now - self.t0)} in | {fmt_eta(eta, bound=True)}")

    def close(self) -> None:
        self._maybe_print(force=True)
