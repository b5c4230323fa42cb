"""Progress lines (progress.py), the eval bar per finished episode, and the torch-thread default (quiet.py).

Why: a CPU training iteration printed nothing for a minute, the eval bar sat at 0/12 until the play ended, and
torch's default threads made a small eval on a busy 2-core box many times slower than one thread."""

from __future__ import annotations

import functools
import time

from opid_rllib import progress
from opid_rllib.progress import Heartbeat, LineBar


def test_heartbeat_prints_the_phase_the_board_and_an_eta_while_the_work_runs():
    lines = []
    with Heartbeat("iteration 1", every_s=0.05, write=lines.append) as beat:
        beat.phase("rollouts")
        progress.post("rollout step", 2, 10, "(4 of 8 playing)", bound=True)
        time.sleep(0.3)
    assert lines, "no line while the phase ran"
    assert lines[-1].startswith("[opid] iteration 1: rollouts, 0s in | rollout step 2/10 (4 of 8 playing), ETA <= ")
    assert "ETA <= " in lines[-1]  # a step cap: the ETA is an upper bound
    assert set(beat.durations) == {"rollouts"} and beat.durations["rollouts"] >= 0.25


def test_heartbeat_eta_comes_from_the_last_iteration_when_the_board_is_silent():
    """Remote runners and learners post on their own process's board: the driver's ETA is the last iteration's."""
    kept = {}
    with Heartbeat("iteration 1", every_s=0, previous=kept) as beat:
        beat.phase("learner update")
        assert beat.line() == "[opid] iteration 1: learner update, 0s in | no ETA before the first iteration ends"
        time.sleep(0.05)
    assert kept["learner update"] >= 0.05  # kept in place for the next iteration
    kept["learner update"] = 60.0
    with Heartbeat("iteration 2", every_s=0, previous=kept, write=lambda _: None) as beat:
        beat.phase("learner update")
        assert beat.line().endswith("| ETA ~1m00s (the last one took 1m00s)"), beat.line()


def test_a_silent_heartbeat_starts_no_thread():
    with Heartbeat("x", every_s=0) as beat:
        assert beat._thread is None


def test_board_restarts_its_clock_for_a_new_pass():
    progress.post("scoring rows", 8, 16)
    t0 = progress.BOARD["t0"]
    progress.post("scoring rows", 16, 16)
    assert progress.BOARD["t0"] == t0
    progress.post("scoring rows", 8, 16)  # the next call's rows: a new pass, a new pace
    assert progress.BOARD["t0"] > t0
    progress.clear()


def test_line_bar_prints_whole_lines_with_an_eta():
    lines = []
    bar = LineBar(4, "alfworld/smoke@v1", every_s=0, write=lines.append)
    bar.update(1)
    bar.set_postfix_str("step 3 (3 live)")
    bar.close()
    assert lines[0] == "alfworld/smoke@v1: 0/4 ep | 0s in | ETA ?"  # as the play starts
    assert lines[1].startswith("alfworld/smoke@v1: 1/4 ep |") and "ETA <= " in lines[1]
    assert lines[-1].startswith("alfworld/smoke@v1: 1/4 ep, step 3 (3 live) |")
    assert len(lines) == 3  # close() after a line saying the same adds none


def test_the_eval_bar_moves_per_finished_episode(monkeypatch):
    """The runner plays a chunk in one call: the bar learns of each ended episode from the live count at the
    next generation step, not only when the chunk returns."""
    import opid_rllib.play as play

    lines = []
    monkeypatch.setattr(play, "LineBar", functools.partial(LineBar, every_s=0, write=lines.append))
    monkeypatch.setattr(play, "episode_record", lambda ep, tid: {"task_id": tid, "won": False})

    class Module:
        def generate(self, prompt_ids, **kw):
            return [None] * len(prompt_ids)

    class Episode:
        def __init__(self, tid):
            self.custom_data = {"opid": {"task_id": tid}}

    class Runner:
        settings = {"max_steps": 4}
        module = Module()

        def sample_groups(self, chunk, **kw):
            for live in (3, 3, 1):  # two episodes end after step 2
                self.module.generate([[0]] * live)
            return [Episode(t) for t in chunk]

    records = play.play_tasks(Runner(), ["a", "b", "c"], temperature=0.0, batch_envs=3)
    assert [r["task_id"] for r in records] == ["a", "b", "c"]
    counts = [line.split(":")[1].split()[0] for line in lines]
    assert "2/3" in counts and counts[-1] == "3/3", lines


def test_one_torch_thread_by_default_on_cpu_unless_set(monkeypatch):
    from opid_rllib import quiet

    monkeypatch.setattr(quiet, "_has_cuda", lambda: False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(quiet.TORCH_THREADS_ENV, raising=False)
    assert quiet.default_torch_threads(None) == 1
    assert quiet.default_torch_threads(3) == 3
    monkeypatch.setenv(quiet.TORCH_THREADS_ENV, "2")  # a CLI's --torch-threads, seen by the processes it starts
    assert quiet.default_torch_threads(None) == 2
    monkeypatch.delenv(quiet.TORCH_THREADS_ENV)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the user's own choice: torch's default follows it
    assert quiet.default_torch_threads(None) is None
    monkeypatch.setattr(quiet, "_has_cuda", lambda: True)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert quiet.default_torch_threads(None) is None


def test_no_line_names_no_phase():
    """Before the first phase and during the exit there is nothing to say (CI once caught a line with no phase)."""
    with Heartbeat("x", every_s=0) as beat:
        assert beat.line() == ""
        beat.phase("rollouts")
        assert beat.line().startswith("[opid] x: rollouts, ")
    assert beat.line() == ""
