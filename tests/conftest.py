"""Suite-wide settings (one model/game cache for the whole run, quiet Ray) and shared fixtures."""

import importlib.util
import os
from pathlib import Path

import pytest

# Built artefacts (tiny model, generated games) are cached once per checkout, not per test.
os.environ.setdefault("OPID_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "opid"))
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# Every ray.init() without an address starts its own local instance: Ray otherwise joins the newest cluster that
# `ray start` or cluster_utils.Cluster left in /tmp/ray/ray_current_cluster, i.e. test_two_nodes' while it runs beside
# other files (their ray.init(num_cpus=...) then failed, and its shutdown took a worker down). Subprocesses inherit it.
os.environ["RAY_ADDRESS"] = "local"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One torch thread per process (set before torch is imported; subprocesses inherit it, as Ray's workers already
# do): the suite's models are small and gain little from a second thread, and on 2 cores shared with Ray actors or
# another job a second thread makes them several times slower (a tiny OPID iteration: 2.6 s with one, 14.9 s with
# two beside a 2-thread job).
os.environ.setdefault("OMP_NUM_THREADS", "1")


STUDIES_TESTS = Path(__file__).resolve().parent / "studies"


def pytest_collection_modifyitems(config, items):
    """Fast lane: `pytest -m "not slow"` skips Ray end-to-end runs and model-heavy tests.

    Every Ray test is slow (a local cluster start alone takes seconds); other tests opt in with
    @pytest.mark.slow. Every test under tests/studies/ (the finished studies' tooling) is marked `studies`, so
    that `-m "not studies"` leaves it out. CI runs everything."""
    for item in items:
        if item.get_closest_marker("ray") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
        if STUDIES_TESTS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.studies)
    # Longest first: scripts/test.sh runs the files on pytest-xdist workers (--dist loadfile --no-loadscope-reorder),
    # which take files in this order, so the learning tests (minutes each) start at once instead of leaving one worker
    # busy at the end (xdist's default reorder by test count ran the one-test learning file last: a 5-min tail).
    rank: dict[str, int] = {}
    for item in items:
        rank[item.fspath] = min(rank.get(item.fspath, 2), _run_order(item))
    items.sort(key=lambda item: rank[item.fspath])  # stable: each file keeps its own order


def _run_order(item) -> int:
    """0 for a learning test, 1 for another slow one, 2 for the rest; a file ranks by its slowest kind."""
    if item.get_closest_marker("learning") is not None:
        return 0
    return 1 if item.get_closest_marker("slow") is not None else 2


@pytest.fixture(autouse=True, scope="module")
def _no_ray_left_to_the_next_file():
    """A file leaves no Ray session in its worker: several files assert that Ray did not start (their checks run
    before it), and which file a worker runs next is xdist's choice."""
    yield
    import sys

    ray = sys.modules.get("ray")  # not imported: nothing to stop (the fast tests never import it)
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def one_thread():
    """One torch thread: on a busy 2-core box two threads are several times slower for this tiny
    model (the CLI's --torch-threads sets it process-wide, so restore it afterwards)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _load_bench(name: str):
    """bench/NAME.py as a module: bench/ holds scripts, not a package."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bench_module():
    """The loader of bench/ scripts: `bench_module("learning")`."""
    return _load_bench
