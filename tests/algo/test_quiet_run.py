"""A real opid-train run as a user sees it: progress lines during an iteration, lines naming what it wrote, none
of the known-harmless notices, no empty ~/ray_results folder; the torch-thread setting reaches Ray's workers.

Why: the first run printed nothing through a 66 s iteration, cluttered its output with Ray's, RLlib's and
transformers' notices, and wrote to ~/ray_results, /tmp/ray and ~/.cache/opid_rllib without saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray
import torch

from opid_rllib.models.cache import default_cache_dir
from tests.algo.helpers import tiny_config

pytestmark = pytest.mark.ray
ROOT = Path(__file__).resolve().parents[2]
HARMLESS = ("Install gputil", "DeprecationWarning", "RLModuleConfig", "new API stack", "Token authentication",
            "Started a local Ray instance", "Loading weights", "Writing model shards")


def test_opid_train_says_where_it_is_and_what_it_wrote(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # RAY_ADDRESS=local stays (conftest)
    # a fresh HOME shows what the run creates there; the model cache stays the shared one (no rebuild)
    env.update(HOME=str(home), OPID_CACHE_DIR=str(default_cache_dir()), PYTHONPATH=str(ROOT))
    out = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "opid_rllib.cli.train", "--env", "searchqa", "--cpu-example", "--no-tune",
         "--stop-iters", "1", "--max-steps", "3", "--tasks-per-iter", "2", "--group-size", "2",
         "--max-new-tokens", "16", "--output", str(out), "--num-cpus", "2", "--checkpoint-at-end",
         "--progress-every-s", "0.5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    text = p.stdout + p.stderr
    assert p.returncode == 0, text[-3000:]
    beats = [line for line in text.splitlines() if line.startswith("[opid] iteration 1: ")]
    assert beats, text[-3000:]  # a heartbeat during the iteration, with its phase and a pace or an ETA
    phases = ("rollouts and analysis, ", "learner update ", "weight sync, ")  # the serial step's three
    assert all(any(ph in b for ph in phases) and "ETA" in b for b in beats), beats
    assert any("rollouts and analysis, " in b for b in beats), beats
    assert f"[opid-train] wrote {out}: result.json" in text and "checkpoints: checkpoint_*" in text
    assert "[opid-train] caches (reused by later runs)" in text and "[opid-train] Ray's logs" in text
    for notice in HARMLESS:
        assert notice not in text, notice
    assert not (home / "ray_results").exists()  # --no-tune keeps the algorithm's log folder in --output
    assert (out / "result.json").exists() and (out / "checkpoint_final").is_dir()


def test_the_torch_thread_setting_reaches_remote_env_runners():
    """The policy's setup applies torch_threads in every process that builds it; Ray's runners included."""
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    try:
        cfg = tiny_config().env_runners(num_env_runners=1).llm(torch_threads=2)
        algo = cfg.build_algo()
        try:
            got = algo.env_runner_group.foreach_env_runner(lambda r: torch.get_num_threads(), local_env_runner=False)
            assert got == [2]
        finally:
            algo.stop()
    finally:
        ray.shutdown()
