"""AnalyzerPool, the Analyzer never-raise contract, Skills serialisation and make_analyzer."""

import json
import threading
import time

import pytest

from opid_rllib.analyzer import (
    Analyzer,
    AnalyzerPool,
    HindsightAnalyzer,
    Skills,
    make_analyzer,
)


class Flaky(Analyzer):
    """Raises on odd step counts, sleeps a little otherwise (to overlap threads)."""

    name = "flaky"

    def __init__(self):
        super().__init__(max_step_skills=2)
        self.threads = set()

    def _analyze(self, traj):
        self.threads.add(threading.current_thread().name)
        time.sleep(0.05)
        if len(traj.steps) % 2:
            raise RuntimeError("boom")
        return Skills(episode_skill="do it", step_skills={0: "now"})


def test_analyzer_never_raises(failure_traj):
    s = Flaky().analyze(failure_traj)        # 7 steps -> raises inside
    assert not s.ok and s.error == "RuntimeError: boom" and s.latency_s > 0

    class Wrong(Analyzer):
        def _analyze(self, traj):
            return {"episode_skill": "x"}

    assert "not Skills" in Wrong().analyze(failure_traj).error


def test_pool_resolves_every_future_to_skills(success_traj, failure_traj):
    an = Flaky()
    with AnalyzerPool(an, num_workers=4) as pool:
        t0 = time.monotonic()
        futs = [pool.submit(t) for t in [success_traj, failure_traj] * 4]
        results = [f.result(timeout=10) for f in futs]
        elapsed = time.monotonic() - t0
    assert all(isinstance(r, Skills) for r in results)
    assert [r.ok for r in results] == [True, False] * 4
    assert elapsed < 8 * 0.05                 # ran concurrently
    assert len(an.threads) > 1 and all(n.startswith("opid-analyzer") for n in an.threads)
    st = pool.stats()
    assert (st["calls"], st["errors"], st["pending"]) == (8, 4, 0)
    assert st["total_latency_s"] >= 8 * 0.05 * 0.9 and pool.calls == 8 and pool.errors == 4
    late = pool.submit(success_traj).result(timeout=1)
    assert late.error == "analyzer pool is closed"


def test_pool_with_hindsight_and_bad_workers(success_traj):
    pool = AnalyzerPool(HindsightAnalyzer(), num_workers=1)
    assert pool.submit(success_traj).result(timeout=5).ok
    pool.close()
    with pytest.raises(ValueError, match="num_workers"):
        AnalyzerPool(HindsightAnalyzer(), num_workers=0)


def test_skills_dict_roundtrip():
    s = Skills("sum", "skill", {3: "a", 1: "b"}, None, 0.5, 2)
    d = json.loads(json.dumps(s.to_dict()))
    assert d["step_skills"] == {"1": "b", "3": "a"}
    assert Skills.from_dict(d) == s
    assert not Skills(episode_skill="  ").ok and not Skills(episode_skill="x", error="e").ok


def test_make_analyzer_errors():
    with pytest.raises(ValueError, match=r"name='gpt'.*hindsight, openai, azure"):
        make_analyzer("gpt")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['model'\]"):
        make_analyzer("hindsight", model="x")
    assert isinstance(make_analyzer("Hindsight", max_step_skills=2), HindsightAnalyzer)
