"""Analyzer faults with the real fake OpenAI server: failed analyses fall back to the plain outcome
advantage, successful ones get outcome + w * Delta, and the API key leaks nowhere."""

import json
import secrets

import numpy as np
import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from envs.base import text_space
from opid_rllib.connectors.outcome import OUTCOME_ADV
from opid_rllib.algorithm import learner_connectors
from opid_rllib.connectors import SAMPLES
from opid_rllib.env_runner import GroupedTextEnvRunner
from opid_rllib.prompts import insert_skills
from opid_rllib.rl_module import LLMRLModule
from tests.algo.helpers import tiny_config
from tests.analyzer.fake_openai_server import FakeOpenAIServer

W = 0.5  # large skill weights: the teacher term is far above float noise


@pytest.fixture
def server():
    srv = FakeOpenAIServer(slow_s=5.0).start()
    yield srv
    srv.stop()


def test_failed_analysis_gets_exact_outcome_advantage_and_key_never_leaks(server, monkeypatch):
    key = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv("OPID_TEST_ANALYZER_KEY", key)  # keys come from the environment, never the config
    # One worker: trajectories reach the server in submission order. The first gets two HTTP 500s
    # (max_retries=2 -> analysis failed), the second a 401 whose body echoes the Authorization
    # header (not retried; the key must be redacted), the rest valid answers.
    server.push("error500", "error500", "echo_auth")
    cfg = tiny_config(group_size=2, tasks_per_iter=2, max_steps=2, analyzer="openai", analyzer_num_workers=1,
                      max_step_skills_per_traj=1, episode_skill_adv_weight=W, step_skill_adv_weight=W,
                      analyzer_config={"base_url": server.base_url, "api_key_env": "OPID_TEST_ANALYZER_KEY",
                                       "model": "fake", "timeout_s": 5.0, "max_retries": 2, "retry_delay_s": 0.01})
    runner = GroupedTextEnvRunner(config=cfg)
    try:
        episodes = runner.sample_groups(list(runner._make_env(0).task_ids()[:2]), seed=3)
        runner_metrics = runner.get_metrics()
    finally:
        runner.stop()
    assert len(episodes) == 4
    # The fault script really ran, and the key really went over the wire (else the leak check is vacuous).
    assert len(server.requests) == 2 + 1 + 2
    auth = [{k.lower(): v for k, v in r["headers"].items()}.get("authorization") for r in server.requests]
    assert auth == [f"Bearer {key}"] * len(server.requests)
    # The analyzer's own counters reach the runner's metrics (this call's share of the cumulative ones).
    assert runner_metrics["analyzer"]["requests"].peek() == 5 and runner_metrics["analyzer"]["calls"].peek() == 4
    assert runner_metrics["analyzer"]["timeouts"].peek() == 0

    skills = [e.custom_data["opid"]["skills"] for e in episodes]
    failed = [k for k, s in enumerate(skills) if s["error"]]
    assert len(failed) == 2, skills
    errors = sorted(skills[k]["error"] for k in failed)
    assert any("500" in e for e in errors) and any("401" in e for e in errors), errors
    assert all(not skills[k]["episode_skill"] and not skills[k]["step_skills"] for k in failed)
    ok = [k for k in range(4) if k not in failed]
    assert all(skills[k]["episode_skill"] for k in ok)

    # The untrained model's steps are all malformed with reward 0, so A_out is 0 everywhere and "exactly A_out"
    # could not be told from "zero": after the outcome connector, every step gets a distinct non-zero one.
    rng = np.random.default_rng(0)
    a_outs = [(rng.normal(size=len(ep)) + 2.0).astype(np.float32) for ep in episodes]
    module = LLMRLModule(observation_space=text_space(), action_space=text_space(), model_config=cfg.model_config)
    metrics = MetricsLogger()
    shared, batch = {}, {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
        if OUTCOME_ADV in shared and not isinstance(shared[OUTCOME_ADV], tuple):
            shared[OUTCOME_ADV] = tuple(a_outs)
    out, t = batch["default_policy"], shared[SAMPLES]
    adv = out["advantages"].numpy()
    assert np.isfinite(adv).all()
    assert metrics.peek(("opid", "analysis_trajectories")) == 4
    assert metrics.peek(("opid", "analysis_failed_trajectories")) == 2

    row, teacher_rows = 0, 0
    for k, ep in enumerate(episodes):
        a_out = a_outs[k]
        prompts = ep.get_extra_model_outputs("prompt")
        resp = ep.get_extra_model_outputs("response_ids")
        rlen = ep.get_extra_model_outputs("response_len")
        logp = ep.get_extra_model_outputs("logp")
        for i in range(len(ep)):
            n = int(rlen[i])
            assert n > 0 and np.all(adv[row, n:] == 0)
            if k in failed:  # fallback: exactly the plain GRPO advantage, no skill prompt scored
                assert not t.use_episode[row] and not t.use_step[row]
                assert t.prompt_ep[row] is None and t.prompt_step[row] is None
                np.testing.assert_array_equal(adv[row, :n], np.full(n, np.float32(a_out[i])))
            else:  # outcome + w * (log pi_old(y | x + skill) - log pi_old(y | x)), rescored here
                step = skills[k]["step_skills"].get(str(i))
                p2 = insert_skills(str(prompts[i]), step_skill=step) if step else \
                    insert_skills(str(prompts[i]), episode_skill=skills[k]["episode_skill"])
                ids, _ = module.encode_prompts([p2])
                teacher = module.score(ids, [[int(x) for x in resp[i][:n]]])[0]
                want = np.float32(a_out[i]) + W * (teacher - np.asarray(logp[i][:n], np.float32))
                np.testing.assert_allclose(adv[row, :n], want, atol=1e-4, rtol=0)
                teacher_rows += int(np.abs(adv[row, :n] - np.float32(a_out[i])).max() > 1e-4)
            row += 1
    assert row == adv.shape[0]
    assert teacher_rows > 0, "the skill term never moved an advantage: the check above would be vacuous"

    # The key appears nowhere: episodes' custom_data (incl. skill dicts and error texts), metrics.
    dumps = [json.dumps(e.custom_data, default=str) for e in episodes]
    dumps += [json.dumps(s, default=str) for s in skills]
    dumps += [json.dumps(runner_metrics, default=str), json.dumps(metrics.reduce(), default=str)]
    for text in dumps:
        assert key not in text and key[len("sk-test-"):] not in text
    assert any("***" in s["error"] for s in skills if s["error"] and "401" in s["error"]), errors
