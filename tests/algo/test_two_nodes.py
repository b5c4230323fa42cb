"""A Ray cluster whose nodes share no disk, simulated on one machine: the head (the driver's node) and a second
node started in its own mount namespace, where the driver's cache folder is covered by an empty one and
$OPID_CACHE_DIR names the node's own empty cache. The env runner and one of two sharded learners run there: training
must not read any file the driver wrote (the tiny model, generated data) through a path only the driver sees, and a
checkpoint of the learners on both nodes restores their shards."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import ray

pytestmark = pytest.mark.ray


def _start_second_node(address: str, hidden: str, empty: str, cache: str) -> subprocess.Popen:
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    resources = json.dumps({"opid_learner": 1, "node2": 2})
    script = (f"mount --bind {empty} {hidden} && exec {ray_bin} start --address={address} --num-cpus 3 "
              f"--resources '{resources}' --block --disable-usage-stats")
    return subprocess.Popen(["unshare", "-m", "sh", "-c", script], env={**os.environ, "OPID_CACHE_DIR": cache},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture
def two_nodes(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("needs unshare -m (a mount namespace) to hide the driver's disk from the second node")
    driver_cache, node_cache, empty = (tmp_path / d for d in ("driver_cache", "node2_cache", "empty"))
    for d in (driver_cache, node_cache, empty):
        d.mkdir()
    monkeypatch.setenv("OPID_CACHE_DIR", str(driver_cache))
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 3, "resources": {"opid_learner": 1}})
    node = _start_second_node(cluster.address, str(driver_cache), str(empty), str(node_cache))
    try:
        ray.init(address=cluster.address)
        deadline = time.time() + 120
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert node.poll() is None and time.time() < deadline, "the second node did not join"
            time.sleep(1)
        yield driver_cache, node_cache
    finally:
        ray.shutdown()
        os.killpg(node.pid, 15)
        node.wait(timeout=60)
        cluster.shutdown()


def _whole_weights(algo) -> dict:
    """The sharded policy's whole weights as rank 0 gathers them (every learner joins the gather)."""
    algo.learner_group.foreach_learner(lambda learner: learner._gather_full_weights())
    state = algo.learner_group.get_state(components="learner/rl_module/default_policy")
    return state["learner"]["rl_module"]["default_policy"]


def test_training_runs_with_a_runner_and_a_learner_on_a_node_without_the_drivers_disk(two_nodes, tmp_path):
    """Then a checkpoint of the sharded learners (one on each node) restores their shards."""
    import torch

    from tests.algo.helpers import tiny_config

    driver_cache, node_cache = two_nodes
    cfg = tiny_config(tasks_per_iter=2, group_size=2, max_steps=2, max_new_tokens=8)
    cfg.env_runners(num_env_runners=1, custom_resources_per_env_runner={"node2": 1})
    cfg.learners(num_learners=2, custom_resources_per_learner={"opid_learner": 1})
    cfg.llm(sharding="fsdp")
    algo = cfg.build_algo()
    try:
        for _ in range(2):
            res = algo.train()
            assert res["learners"]["default_policy"]["num_samples"] > 0

        def where(_=None):
            return ray.get_runtime_context().get_node_id(), os.environ.get("OPID_CACHE_DIR")

        runner_nodes = algo.env_runner_group.foreach_env_runner(where, local_env_runner=False)
        learner_nodes = [r.get() for r in algo.learner_group.foreach_learner(where)]
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        saved = _whole_weights(algo)
        algo.train()
        assert any(not torch.equal(v, saved[k]) for k, v in _whole_weights(algo).items())
        algo.restore_from_path(path)
        restored = _whole_weights(algo)
        assert all(torch.equal(v, saved[k]) for k, v in restored.items())
    finally:
        algo.stop()
    head = ray.get_runtime_context().get_node_id()
    assert [c for _, c in runner_nodes] == [str(node_cache)] and runner_nodes[0][0] != head
    assert sorted(c for _, c in learner_nodes) == sorted([str(driver_cache), str(node_cache)])
    # the second node built its own tiny model in its own cache; the driver's stays where the driver put it
    assert list(node_cache.glob("models/*/config.json")) and list(driver_cache.glob("models/*/config.json"))
