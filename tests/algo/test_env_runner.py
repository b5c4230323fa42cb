"""The grouped runner: G episodes per task, whole-string observations, faults counted not fatal."""

import gymnasium as gym
import numpy as np
import pytest

from envs.searchqa.env import SearchQAEnv
from opid_rllib.env_runner import ENV_ERROR_OBS, GroupedTextEnvRunner
from tests.algo.helpers import tiny_config


@pytest.fixture(scope="module")
def runner():
    r = GroupedTextEnvRunner(config=tiny_config(group_size=3))
    yield r
    r.stop()


def test_groups_share_task_and_differ_across_tasks(runner):
    ids = list(runner._make_env(0).task_ids()[:2])
    eps = runner.sample_groups(ids, seed=1)
    assert len(eps) == 2 * 3
    metas = [e.custom_data["opid"] for e in eps]
    for k, tid in enumerate(ids):
        group = metas[3 * k: 3 * k + 3]
        assert {m["task_id"] for m in group} == {tid}
        assert len({m["group_id"] for m in group}) == 1
        assert len({m["traj_id"] for m in group}) == 3
    assert metas[0]["group_id"] != metas[3]["group_id"]
    for e in eps:
        assert e.is_done and 1 <= len(e) <= 3
        obs = e.get_observations()
        # Text observations stay whole strings (a vector env would split them into characters).
        assert all(isinstance(o, str) for o in obs) and obs[0].startswith("Question:")
        n = e.get_extra_model_outputs("response_len")
        assert all(0 < int(x) <= 12 for x in n)
        assert e.custom_data["opid"]["skills"]["episode_skill"]  # hindsight analyzer ran


def test_same_seed_same_rollout():
    cfg = tiny_config(group_size=2, analyzer="none")
    a, b = GroupedTextEnvRunner(config=cfg), GroupedTextEnvRunner(config=cfg)
    ids = list(a._make_env(0).task_ids()[:1])
    ea, eb = a.sample_groups(ids, seed=7), b.sample_groups(ids, seed=7)
    for x, y in zip(ea, eb):
        assert list(x.get_actions()) == list(y.get_actions())
        assert x.custom_data["opid"]["skills"] is None


class CrashingSearchQA(SearchQAEnv):
    """A real env that raises on its 2nd step (fault injection)."""

    def _step_task(self, action):
        if self._step_count >= 2:
            raise RuntimeError("boom")
        return super()._step_task(action)


def test_crashing_env_is_counted_and_episode_kept():
    gym.register("opid-test/CrashingSearchQA-v0", entry_point=CrashingSearchQA, disable_env_checker=True)
    cfg = tiny_config(group_size=2, max_steps=4, analyzer="none")
    cfg.environment("opid-test/CrashingSearchQA-v0", env_config={"max_steps": 4})
    r = GroupedTextEnvRunner(config=cfg)
    assert r.env_name == "searchqa"
    eps = r.sample_groups(list(r._make_env(0).task_ids()[:1]), seed=0)
    crashed = [e for e in eps if e.custom_data["opid"]["env_error"]]
    assert crashed, "the untrained model never answers at step 1, so the crash must be reached"
    # Episodes that answered at step 1 end normally; the rest hit the crash at step 2.
    for e in crashed:
        assert len(e) == 2 and e.is_truncated and e.get_observations()[-1] == ENV_ERROR_OBS
    m = r.get_metrics()
    assert m["opid_runner"]["env_errors"].peek() == len(crashed)
    # The runner rebuilt the env: the next rollout still works.
    assert len(r.sample_groups(list(r._make_env(0).task_ids()[:1]), seed=1)) == 2


class UnrebuildableSearchQA(SearchQAEnv):
    """A real env whose backend dies: its first copy raises on every step, and every later construction
    raises too (fault injection)."""

    built = 0

    def __init__(self, *args, **kwargs):
        UnrebuildableSearchQA.built += 1
        if UnrebuildableSearchQA.built > 1:
            raise ConnectionError("search backend unreachable")
        super().__init__(*args, **kwargs)

    def _step_task(self, action):
        raise RuntimeError("search backend died")


def test_env_that_cannot_be_rebuilt_is_counted_not_fatal():
    """The crash's rebuild fails, then the next slot's construction and its retry fail: sample_groups still
    returns the episode it has, each failure counted, and the next rollout runs on what is left."""
    gym.register("opid-test/UnrebuildableSearchQA-v0", entry_point=UnrebuildableSearchQA, disable_env_checker=True)
    UnrebuildableSearchQA.built = 0
    cfg = tiny_config(group_size=2, max_steps=3, analyzer="none")
    cfg.environment("opid-test/UnrebuildableSearchQA-v0", env_config={"max_steps": 3})
    r = GroupedTextEnvRunner(config=cfg)
    try:
        task = list(r._make_env(0).task_ids()[:1])
        eps = r.sample_groups(task, seed=0)
        # Copy 0 crashed on its first step and its rebuild failed; copy 1's env (slot 1) never got built.
        assert len(eps) == 1 and eps[0].custom_data["opid"]["env_error"] and len(eps[0]) == 1
        assert r.get_metrics()["opid_runner"]["env_errors"].peek() == 1 + 1 + 2
        again = r.sample_groups(task, seed=1)           # slot 0 still holds the first env: it resets, then crashes
        assert len(again) == 1 and again[0].custom_data["opid"]["env_error"]
    finally:
        r.stop()


def test_format_invalid_and_inadmissible_steps_are_counted():
    """opid_runner/format_invalid_steps and inadmissible_steps: a malformed response, then a well-formed command
    the real ALFWorld game did not offer (no instance number), then one it did; and a whole rollout's metrics
    equal the count re-read from its episodes."""
    from types import SimpleNamespace

    from opid_rllib.prompts.admissible import is_inadmissible

    r = GroupedTextEnvRunner(config=tiny_config("alfworld", group_size=1, max_steps=4, analyzer="none"))
    try:
        counts = {"env_errors": 0, "steps": 0, "format_invalid_steps": 0, "inadmissible_steps": 0}
        slot = r._reset_slot(0, r._make_env(0).task_ids()[0], "g", 0, counts)
        goto = next(a for a in slot["info"]["admissible_actions"] if a.startswith("go to "))
        for text in ("no tags at all", "<think>x</think><action>take potato from microwave 1</action>",
                     f"<think>x</think><action>{goto}</action>"):
            r._step_slot(slot, "prompt", SimpleNamespace(text=text, token_ids=[1], logprobs=[0.0]), False, counts)
        assert (counts["steps"], counts["format_invalid_steps"], counts["inadmissible_steps"]) == (3, 1, 1)

        eps = r.sample_groups(list(r._make_env(0).task_ids()[:2]), seed=3)
        infos = [(e.get_extra_model_outputs("format_valid"), e.get_infos(), e.get_actions()) for e in eps]
        bad = sum(not v for fv, _, _ in infos for v in fv)
        inadm = sum(bool(v) and is_inadmissible(a, info.get("admissible_actions") or ())
                    for fv, inf, acts in infos for v, info, a in zip(fv, inf, acts))
        m = r.get_metrics()["opid_runner"]
        assert m["format_invalid_steps"].peek() == bad and m["inadmissible_steps"].peek() == inadm
        assert bad + inadm <= sum(len(e) for e in eps)
    finally:
        r.stop()


def test_rllibs_sample_draws_fresh_tasks_on_every_call():
    """RLlib's public entry point used to re-seed on every call, so it played the same tasks each time."""
    r = GroupedTextEnvRunner(config=tiny_config(group_size=1, tasks_per_iter=3, max_steps=1, max_new_tokens=4,
                                                analyzer="none", episode_skill_adv_weight=0.0,
                                                step_skill_adv_weight=0.0))
    try:
        draws = [[e.custom_data["opid"]["task_id"] for e in r.sample()] for _ in range(3)]
    finally:
        r.stop()
    assert all(len(d) == 3 for d in draws) and len({tuple(d) for d in draws}) == 3, draws
