"""Pipelined iterations (rollout_staleness > 0, opid_rllib/pipeline.py): the off-policy math on hand-built cases and on
real rollouts scored by moved weights, the refusal without remote runners, late analyses with real Ray object refs,
and a real pipelined run on a remote runner that resumes from a checkpoint taken with a batch in flight."""

import copy
import time

import numpy as np
import pytest
import ray
import torch

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.connectors import SAMPLES, importance_sampling_cap, recompute_old_logp
from opid_rllib.losses import ppo_token_loss
from opid_rllib.advantages import truncated_importance_weights
from tests.algo.helpers import rollouts_and_module, tiny_config


def test_truncated_importance_weights_by_hand():
    prox = np.log(np.array([[1.0, 3.0, 0.5, 0.9], [0.2, 0.2, 0.2, 0.2]]))
    behav = np.log(np.array([[1.0, 1.0, 1.0, 0.3], [0.4, 0.4, 0.4, 0.4]]))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
    w, truncated = truncated_importance_weights(prox, behav, mask, cap=2.0)
    # ratios 1, 3 (cut to 2), 0.5; off the mask 1 (the 3.0 of [0, 3] is padding); row 2: 0.5 twice
    np.testing.assert_allclose(w, [[1.0, 2.0, 0.5, 1.0], [0.5, 0.5, 1.0, 1.0]], rtol=1e-6)
    assert truncated == 1
    w, _ = truncated_importance_weights(np.array([[np.nan, 0.0]]), np.array([[0.0, -np.inf]]), np.ones((1, 2)), 2.0)
    np.testing.assert_array_equal(w, [[0.0, 2.0]])  # a NaN log-prob leaves the loss; exp(+inf) is cut to the cap
    with pytest.raises(ValueError, match="importance_sampling_cap"):
        truncated_importance_weights(prox, behav, mask, cap=0.0)


def test_the_weight_scales_the_clipped_surrogate_per_token():
    """Decoupled PPO: -w * min(r A, clip(r) A) with r against pi_prox; w = 1 is the plain loss."""
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.0]]))
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    mask = torch.ones(1, 3)
    kw = dict(kl_coeff=0.0, entropy_coeff=0.0)
    plain, _ = ppo_token_loss(logp, old, adv, mask, **kw)
    # r = 1.5 (A > 0: clipped to 1.2 -> -1.2), r = 0.5 (A < 0: max(0.5, 0.8) -> 0.8), r = 1 -> -2
    assert float(plain) == pytest.approx(-1.2 + 0.8 - 2.0)
    w = torch.tensor([[2.0, 0.5, 0.0]])
    weighted, _ = ppo_token_loss(logp, old, adv, mask, is_weight=w, **kw)
    assert float(weighted) == pytest.approx(2.0 * -1.2 + 0.5 * 0.8 + 0.0)
    logp.requires_grad_(True)
    loss, _ = ppo_token_loss(logp, old, adv, mask, is_weight=w, **kw)
    loss.backward()
    assert float(logp.grad[0, 2]) == 0.0  # a zero weight: no gradient from that token


def test_staleness_settings_are_checked_before_ray_starts():
    cfg = tiny_config().training(rollout_staleness=1)
    with pytest.raises(ValueError, match=r"rollout_staleness=1: pipelined iterations need remote env runners.*"
                                         r"num_env_runners >= 1"):
        cfg.validate()
    for bad, field in (({"rollout_staleness": -1}, "rollout_staleness=-1"),
                       ({"importance_sampling_cap": 0.0}, "importance_sampling_cap"),
                       ({"analysis_deadline_s": -1.0}, "analysis_deadline_s")):
        cfg = tiny_config(**bad)
        cfg.env_runners(num_env_runners=1)
        with pytest.raises(ValueError, match=field):
            cfg.validate()
    ok = tiny_config(rollout_staleness=1)
    ok.env_runners(num_env_runners=1)
    ok.validate()
    # The defaults: serial (the paper's loop, no weight); a stale batch takes the ratio against the sampler's
    # log-probs (no weight); recompute_old_logp=True takes it against the recomputed ones, with the capped weight.
    assert OPIDConfig().rollout_staleness == 0 and importance_sampling_cap(OPIDConfig()) is None
    assert recompute_old_logp(ok) is False and importance_sampling_cap(ok) is None
    ok.training(recompute_old_logp=True)
    assert importance_sampling_cap(ok) == 2.0


def test_the_cli_refuses_staleness_without_remote_runners_in_one_line(tmp_path, capsys):
    from opid_rllib.cli.train import main

    t0 = time.perf_counter()
    assert main(["--env", "searchqa", "--no-tune", "--stop-iters", "1", "--rollout-staleness", "1",
                 "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "num_env_runners >= 1" in err[0] and time.perf_counter() - t0 < 10
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def stale_setup():
    """Real rollouts, and the module that sampled them moved by one small step: the learner a batch later."""
    cfg, episodes, module = rollouts_and_module(episode_skill_adv_weight=0.5, step_skill_adv_weight=0.5)
    moved = copy.deepcopy(module)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.02 * torch.randn_like(p, generator=torch.Generator().manual_seed(p.numel())))
    return cfg, episodes, moved


def _pipeline(cfg, episodes, module):
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.algorithm import learner_connectors

    shared, batch, metrics = {}, {}, MetricsLogger()
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    return batch["default_policy"], shared[SAMPLES], metrics


@pytest.mark.parametrize("recompute", [True, False])
def test_a_stale_batch_scores_delta_on_one_set_of_weights_and_picks_its_ratio(stale_setup, recompute):
    """Delta = log pi(y | x + skill) - log pi(y | x), both under the learner's weights now (not the sampler's); the
    PPO ratio's denominator is the sampler's own log-probs without a weight (the default, recompute_old_logp=False),
    or the recomputed log-probs with the truncated weight for the lag (recompute_old_logp=True)."""
    cfg, episodes, moved = stale_setup
    cfg = copy.copy(cfg).training(rollout_staleness=1, recompute_old_logp=recompute, importance_sampling_cap=1.05)
    out, t, metrics = _pipeline(cfg, episodes, moved)
    now = moved.score(t.prompt_ids, t.response_ids)  # log pi(y | x) under the moved weights
    gaps = []
    for i in range(len(t)):
        r = len(t.response_ids[i])
        np.testing.assert_allclose(t.logp_old[i], now[i], atol=1e-5)
        teacher = t.logp_step[i] if t.use_step[i] else t.logp_ep[i]
        if teacher is not None:
            want = t.outcome_adv[i] + 0.5 * (teacher - now[i])
            np.testing.assert_allclose(out["advantages"][i, :r].numpy(), want, atol=1e-4)
        ratio_base = now[i] if recompute else t.sampling_logp[i]
        np.testing.assert_allclose(out["old_logp"][i, :r].numpy(), ratio_base, atol=1e-5)
        gaps.append(np.abs(now[i] - t.sampling_logp[i]))
        if recompute:
            w = np.minimum(np.exp(now[i].astype(np.float64) - t.sampling_logp[i]), 1.05)
            np.testing.assert_allclose(out["is_weight"][i, :r].numpy(), w, rtol=1e-4)
    gap = np.concatenate(gaps)
    assert gap.mean() > 1e-3  # the weights moved: the lag shows in the sampler-learner gap, which is logged
    assert metrics.peek(("opid", "sampler", "logp_gap_mean")) == pytest.approx(gap.mean(), rel=1e-3)
    if recompute:
        share = metrics.peek(("opid", "offpolicy", "is_truncated_share"))
        ratios = np.exp(np.concatenate([now[i] - t.sampling_logp[i] for i in range(len(t))]).astype(np.float64))
        assert share == pytest.approx(float((ratios > 1.05).mean()), abs=1e-6) and 0 < share < 1
    else:
        assert "is_weight" not in out


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray session for the file's Ray tests (a session costs about 5 CPU-s to start)."""
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.mark.ray
def test_late_analyses_fall_back_to_the_grpo_signal_and_are_counted(ray_local):
    """Analyses arrive as Ray object refs; the driver waits for them until the deadline and no longer: a late one
    is an error analysis (no teacher term), counted, and the wait ends at the deadline."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    from opid_rllib.analyzer.base import Skills
    from opid_rllib.pipeline import ANALYSIS_REF
    from opid_rllib.pipeline import collect_analyses
    from opid_rllib.prompts.skills import usable_skills

    @ray.remote(num_cpus=0)
    def analysis(delay_s):
        time.sleep(delay_s)
        return Skills(episode_skill="Open the red door first.", episode_summary="ok").to_dict()

    episodes = []
    for delay in (0.0, 0.0, 5.0):
        ep = SingleAgentEpisode()
        ep.custom_data["opid"] = {ANALYSIS_REF: analysis.remote(delay)}
        episodes.append(ep)
    ray.get(episodes[0].custom_data["opid"][ANALYSIS_REF])
    t0 = time.monotonic()
    stats = collect_analyses(episodes, deadline=t0 + 1.0)
    assert 0.5 < time.monotonic() - t0 < 3.0
    assert stats["late_analyses"] == 1
    skills = [ep.custom_data["opid"]["skills"] for ep in episodes]
    assert all(ANALYSIS_REF not in ep.custom_data["opid"] for ep in episodes)
    assert usable_skills(skills[0]) is not None and usable_skills(skills[1]) is not None
    assert "late analysis" in skills[2]["error"] and usable_skills(skills[2]) is None


def _weights(algo) -> dict:
    state = algo.learner_group.get_state()["learner"]["rl_module"]["default_policy"]
    return {k: torch.as_tensor(v).clone() for k, v in state.items()}


@pytest.mark.ray
def test_a_pipelined_run_logs_its_lag_and_resumes_exactly_from_a_checkpoint_with_a_batch_in_flight(ray_local, tmp_path):
    """One remote runner samples batch k+1 while the (local) learner updates on batch k: from the second iteration
    on every batch is one update behind, the sampler-learner log-prob gap is logged, and a checkpoint taken
    with a batch in flight resumes to the same weights and the same next batch."""
    cfg = tiny_config(max_steps=2, max_new_tokens=8, rollout_staleness=1, lr=1e-3)
    cfg.env_runners(num_env_runners=1)
    algo = cfg.build_algo()
    try:
        first = algo.train()
        pipe = first["opid_pipeline"]
        assert pipe["policy_lag_max"] == 0 and pipe["batches_in_flight"] == 1 and pipe["late_analyses"] == 0
        second = algo.train()
        assert second["opid_pipeline"]["policy_lag_mean"] == second["opid_pipeline"]["policy_lag_max"] == 1
        assert second["opid_pipeline"]["learner_wait_s"] >= 0 and second["opid_pipeline"]["runner_wait_s"] >= 0
        opid = second["learners"]["opid"]
        # the default ratio is against the sampler's log-probs: no importance weight; the lag's gap is logged
        assert "offpolicy" not in opid and opid["sampler"]["logp_gap_mean"] > 0
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        in_flight = [ep.custom_data["opid"]["traj_id"] for ep in algo._pipeline.episodes(algo._pipeline.queue[0])]
        third = algo.train()
        w_on = _weights(algo)
        algo.restore_from_path(path)
        assert algo._pipeline.version == 2 and len(algo._pipeline.queue) == 1
        assert [ep.custom_data["opid"]["traj_id"] for ep in algo._pipeline.episodes(algo._pipeline.queue[0])] \
            == in_flight
        again = algo.train()
        w_again = _weights(algo)
        assert w_on.keys() == w_again.keys() and all(torch.equal(w_on[k], w_again[k]) for k in w_on)
        assert again["opid"]["success_rate"] == third["opid"]["success_rate"]
    finally:
        algo.stop()
