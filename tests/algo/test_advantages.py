"""Hand-computed checks of opid_rllib.advantages (expected numbers are written out, not recomputed)."""

import numpy as np
import pytest

from opid_rllib.advantages import (
    combine_advantages,
    outcome_advantage,
    step_scores,
    teacher_delta,
)
from opid_rllib.analyzer.base import discounted_returns  # the analyzer prompt's returns (gamma's only use)

EPS = 1e-6


# ---------------------------------------------------------------- returns / scores


def test_discounted_returns():
    # G_2 = 1; G_1 = 0 + .5*1 = .5; G_0 = 0 + .5*.5 = .25
    np.testing.assert_allclose(discounted_returns([0.0, 0.0, 1.0], 0.5), [0.25, 0.5, 1.0])
    # G_1 = 2; G_0 = 1 + 0.9*2 = 2.8
    np.testing.assert_allclose(discounted_returns([1.0, 2.0], 0.9), [2.8, 2.0])
    assert discounted_returns([], 0.95).shape == (0,)


def test_step_scores_penalise_invalid_steps_only():
    s = step_scores(10.0, np.array([True, False, True]), 0.1)
    np.testing.assert_allclose(s, [10.0, 9.9, 10.0])
    np.testing.assert_allclose(step_scores(0.0, np.array([False]), 0.01), [-0.01])


# ---------------------------------------------------------------- outcome advantage
# Group "a": trajectory 1 has 3 steps, reward 10, step 1 invalid (penalty 0.1) -> 10, 9.9, 10;
#            trajectory 2 has 1 step, reward 0 -> 0.
# Cross-step stats over the 4 step-samples: mu = 29.9 / 4 = 7.475
# deviations 2.525, 2.425, 2.525, -7.475; squares 6.375625, 5.880625, 6.375625, 55.875625
# sum 74.5075; unbiased var = 74.5075 / 3; sigma = sqrt(24.835833...) = 4.98355...
GROUP_A_SCORES = [10.0, 9.9, 10.0, 0.0]
GROUP_A_DEV = [2.525, 2.425, 2.525, -7.475]
GROUP_A_SIGMA = np.sqrt(74.5075 / 3)


def test_outcome_mean_cross_step():
    adv = outcome_advantage(np.array(GROUP_A_SCORES), ["a"] * 4, "mean")
    np.testing.assert_allclose(adv, GROUP_A_DEV, atol=1e-12)


def test_outcome_mean_std_cross_step_unbiased():
    adv = outcome_advantage(np.array(GROUP_A_SCORES), ["a"] * 4, "mean_std")
    assert GROUP_A_SIGMA == pytest.approx(4.983556, abs=1e-6)
    expected = np.array(GROUP_A_DEV) / (GROUP_A_SIGMA + EPS)
    np.testing.assert_allclose(adv, expected, rtol=1e-10)
    # 2.525 / 4.983556 = 0.506666...; -7.475 / 4.983556 = -1.499933...
    assert adv[0] == pytest.approx(0.506666, abs=1e-5)
    assert adv[3] == pytest.approx(-1.499933, abs=1e-5)


def test_outcome_single_sample_group_uses_mu0_sigma1():
    np.testing.assert_allclose(outcome_advantage(np.array([5.0]), ["b"], "mean"), [5.0])
    np.testing.assert_allclose(
        outcome_advantage(np.array([5.0]), ["b"], "mean_std"), [5.0 / (1.0 + EPS)]
    )


def test_outcome_multiple_groups_interleaved():
    # group a as above, group b = {1, 3}: mu 2, unbiased sigma sqrt(2); group c = {7}: single
    scores = np.array([10.0, 1.0, 9.9, 7.0, 10.0, 3.0, 0.0])
    groups = ["a", "b", "a", "c", "a", "b", "a"]
    adv_mean = outcome_advantage(scores, groups, "mean")
    np.testing.assert_allclose(adv_mean, [2.525, -1.0, 2.425, 7.0, 2.525, 1.0, -7.475], atol=1e-12)

    adv_std = outcome_advantage(scores, groups, "mean_std")
    s2 = np.sqrt(2.0) + EPS
    sa = GROUP_A_SIGMA + EPS
    np.testing.assert_allclose(
        adv_std,
        [2.525 / sa, -1.0 / s2, 2.425 / sa, 7.0 / (1 + EPS), 2.525 / sa, 1.0 / s2, -7.475 / sa],
        rtol=1e-10,
    )


def test_outcome_identical_scores_give_zero():
    for mode in ("mean", "mean_std"):
        np.testing.assert_allclose(outcome_advantage(np.array([10.0, 10.0, 10.0]), [0, 0, 0], mode), 0.0)


def test_outcome_bad_mode():
    with pytest.raises(ValueError, match="advantage_mode.*mean_std.*mean"):
        outcome_advantage(np.array([1.0, 2.0]), [0, 0], "mean_std_norm")


# ---------------------------------------------------------------- teacher delta


def test_teacher_delta_masks_and_isolates_nan():
    lt = np.array([[-1.0, -2.0, np.nan], [np.nan, np.inf, -np.inf]])
    lo = np.array([[-1.5, -1.0, -3.0], [0.0, 0.0, 0.0]])
    m = np.array([[1, 1, 0], [1, 1, 1]])
    q = np.array([True, False])
    d = teacher_delta(lt, lo, m, q)
    np.testing.assert_array_equal(d, [[0.5, -1.0, 0.0], [0.0, 0.0, 0.0]])
    assert np.isfinite(d).all()


def test_teacher_delta_shape_errors():
    with pytest.raises(ValueError):
        teacher_delta(np.zeros((2, 3)), np.zeros((2, 2)), np.ones((2, 3)), np.ones(2, bool))
    with pytest.raises(ValueError):
        teacher_delta(np.zeros((2, 3)), np.zeros((2, 3)), np.ones((2, 3)), np.ones(3, bool))


# ---------------------------------------------------------------- combination
# 3 samples, L = 3.
OUT = np.array([1.0, -2.0, 0.5])
MASK = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
D_EP = np.array([[0.5, -1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # q_ep = [T, F, F]
D_ST = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # q_step = [F, T, F]


def test_combine_both_weights():
    adv, stats = combine_advantages(OUT, MASK, D_EP, D_ST, 0.1, 0.01)
    # row 0: 1 + 0.1*0.5, 1 + 0.1*(-1); row 1: -2 + 0.01*2; row 2: outcome only
    np.testing.assert_allclose(
        adv, [[1.05, 0.9, 0.0], [-1.98, 0.0, 0.0], [0.5, 0.5, 0.5]], atol=1e-12
    )
    # 6 response tokens.
    # outcome values 1, 1, -2, .5, .5, .5 -> mean 1.5/6 = .25, abs_mean 5.5/6
    # episode term .05, -.1 (+ zeros)     -> mean -.05/6,      abs_mean .15/6
    # step term .02 (+ zeros)             -> mean .02/6,       abs_mean .02/6
    # sum of abs means 5.67/6
    assert stats["outcome_mean"] == pytest.approx(0.25)
    assert stats["outcome_abs_mean"] == pytest.approx(5.5 / 6)
    assert stats["episode_teacher_mean"] == pytest.approx(-0.05 / 6)
    assert stats["episode_teacher_abs_mean"] == pytest.approx(0.15 / 6)
    assert stats["step_teacher_mean"] == pytest.approx(0.02 / 6)
    assert stats["step_teacher_abs_mean"] == pytest.approx(0.02 / 6)
    assert stats["outcome_share"] == pytest.approx(5.5 / 5.67)
    assert stats["episode_teacher_share"] == pytest.approx(0.15 / 5.67)
    assert stats["step_teacher_share"] == pytest.approx(0.02 / 5.67)
    # teacher on tokens (0,0), (0,1), (1,0) of 6 response tokens
    assert stats["teacher_active_token_ratio"] == pytest.approx(0.5)


def test_combine_none_deltas_and_zero_weights_are_outcome_only():
    expected = [[1.0, 1.0, 0.0], [-2.0, 0.0, 0.0], [0.5, 0.5, 0.5]]
    adv, stats = combine_advantages(OUT, MASK, None, None, 0.1, 0.01)
    np.testing.assert_allclose(adv, expected)
    adv, stats = combine_advantages(OUT, MASK, D_EP, D_ST, 0.0, 0.0)
    np.testing.assert_allclose(adv, expected)
    assert stats["outcome_share"] == 1.0
    assert stats["episode_teacher_share"] == 0.0
    assert stats["teacher_active_token_ratio"] == 0.0


def test_combine_outcome_weight_zero_is_pure_teacher():
    adv, stats = combine_advantages(OUT, MASK, D_EP, D_ST, 0.1, 0.01, outcome_weight=0.0)
    np.testing.assert_allclose(adv, [[0.05, -0.1, 0.0], [0.02, 0.0, 0.0], [0.0, 0.0, 0.0]], atol=1e-12)
    assert stats["outcome_share"] == 0.0
    assert stats["episode_teacher_share"] == pytest.approx(0.15 / 0.17)
    assert stats["step_teacher_share"] == pytest.approx(0.02 / 0.17)


def test_combine_all_zero_stats():
    adv, stats = combine_advantages(np.zeros(2), np.ones((2, 2)), None, None, 1.0, 1.0)
    np.testing.assert_array_equal(adv, 0.0)
    for k in ("outcome", "episode_teacher", "step_teacher"):
        assert stats[f"{k}_share"] == 0.0


def test_combine_masks_garbage_outside_response():
    d = np.array([[np.nan, 1.0], [np.inf, np.nan]])
    m = np.array([[0, 1], [0, 0]])
    adv, _ = combine_advantages(np.array([2.0, 3.0]), m, d, None, 0.5, 0.0)
    np.testing.assert_array_equal(adv, [[0.0, 2.5], [0.0, 0.0]])


# Normalisation: q_ep = [T, T, F], all tokens in the response.
# active values 1, 3, 5, 7 -> mean 4, population std sqrt((9+1+1+9)/4) = sqrt(5)
D_NORM = np.array([[1.0, 3.0], [5.0, 7.0], [0.0, 0.0]])
M_NORM = np.ones((3, 2))
Q_NORM = np.array([True, True, False])


def test_normalize_teacher_zscore_over_active_tokens():
    adv, _ = combine_advantages(
        np.zeros(3), M_NORM, D_NORM, None, 1.0, 0.0,
        normalize_teacher=True, episode_sample_mask=Q_NORM,
    )
    s = np.sqrt(5.0) + EPS
    np.testing.assert_allclose(adv, [[-3 / s, -1 / s], [1 / s, 3 / s], [0.0, 0.0]], rtol=1e-10)
    # inferred q (rows with any non-zero delta) gives the same here
    adv2, _ = combine_advantages(np.zeros(3), M_NORM, D_NORM, None, 1.0, 0.0, normalize_teacher=True)
    np.testing.assert_allclose(adv2, adv)
    # weight applied after normalisation
    adv3, _ = combine_advantages(
        np.zeros(3), M_NORM, D_NORM, None, 0.001, 0.0,
        normalize_teacher=True, episode_sample_mask=Q_NORM,
    )
    np.testing.assert_allclose(adv3, 0.001 * adv)


def test_normalize_then_clip():
    adv, _ = combine_advantages(
        np.zeros(3), M_NORM, D_NORM, None, 1.0, 0.0,
        normalize_teacher=True, clip_teacher=1.0, episode_sample_mask=Q_NORM,
    )
    # -3/sqrt5 = -1.342 -> -1; -1/sqrt5 = -0.4472; 0.4472; 1.342 -> 1
    np.testing.assert_allclose(adv, [[-1.0, -0.447214], [0.447214, 1.0], [0.0, 0.0]], atol=1e-6)


def test_normalize_constant_values_only_centres():
    d = np.array([[2.0, 2.0], [0.0, 0.0]])
    adv, _ = combine_advantages(
        np.zeros(2), np.ones((2, 2)), d, None, 1.0, 0.0,
        normalize_teacher=True, episode_sample_mask=np.array([True, False]),
    )
    np.testing.assert_array_equal(adv, 0.0)


def test_clip_before_weighting_per_component():
    d_ep = np.array([[0.5, -3.0]])
    d_st = np.array([[4.0, 0.2]])
    adv, _ = combine_advantages(
        np.array([1.0]), np.ones((1, 2)), d_ep, d_st, 0.1, 0.01, clip_teacher=1.0
    )
    # 1 + 0.1*0.5 + 0.01*1 = 1.06; 1 + 0.1*(-1) + 0.01*0.2 = 0.902
    np.testing.assert_allclose(adv, [[1.06, 0.902]], atol=1e-12)


def test_teacher_sample_term_is_weighted_clipped_and_never_normalised():
    """Delta_T on teacher-sampled rows (row 2 here): w_T * clip(Delta_T) on its response tokens, added to the
    rest; z-scoring would flip the sign of a mostly positive Delta_T, so normalize_teacher leaves it alone."""
    d_t = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [3.0, 0.5, 9.0]])
    d_t_garbage = d_t + np.array([[0, 0, 7.0], [0, 4.0, 0], [0, 0, 0]])  # outside the mask: ignored
    for normalize in (False, True):
        adv, stats = combine_advantages(OUT, MASK, None, None, 0.1, 0.01, delta_sample=d_t_garbage, w_sample=0.5,
                                        clip_teacher=2.0, normalize_teacher=normalize)
        np.testing.assert_allclose(adv, [[1.0, 1.0, 0.0], [-2.0, 0.0, 0.0], [1.5, 0.75, 1.5]], atol=1e-12)
        assert stats["sample_teacher_mean"] == pytest.approx((1.0 + 0.25 + 1.0) / 6)
        assert stats["teacher_active_token_ratio"] == pytest.approx(0.5)
    adv0, stats0 = combine_advantages(OUT, MASK, None, None, 0.1, 0.01, delta_sample=d_t, w_sample=0.0)
    np.testing.assert_allclose(adv0, [[1.0, 1.0, 0.0], [-2.0, 0.0, 0.0], [0.5, 0.5, 0.5]], atol=1e-12)
    assert stats0["sample_teacher_share"] == 0.0


def test_end_to_end_group_example():
    # Group of the module docstring: scores -> mean advantages -> token advantages with a teacher
    scores = np.concatenate(
        [step_scores(10.0, np.array([True, False, True]), 0.1), step_scores(0.0, np.array([True]), 0.1)]
    )
    a_out = outcome_advantage(scores, ["g"] * 4, "mean")
    m = np.ones((4, 2))
    lt = np.full((4, 2), -1.0)
    lo = np.full((4, 2), -2.0)
    d_ep = teacher_delta(lt, lo, m, np.array([True, False, True, True]))
    adv, stats = combine_advantages(a_out, m, d_ep, None, 0.001, 0.001)
    np.testing.assert_allclose(
        adv[:, 0], [2.525 + 0.001, 2.425, 2.525 + 0.001, -7.475 + 0.001], atol=1e-12
    )
    assert stats["teacher_active_token_ratio"] == pytest.approx(6 / 8)


def test_delta_by_plan_hand_built_batch():
    from opid_rllib.advantages import delta_by_plan

    nan = float("nan")
    delta = np.array([[0.5, 0.5, 0.0],     # on plan, routed: tokens +0.5 +0.5
                      [-1.0, 0.2, 9.0],    # off plan, routed, 2 real tokens: sum -0.8 < 0
                      [0.4, 0.0, 0.0],     # off plan, routed, 1 token: sum +0.4
                      [-3.0, -3.0, -3.0],  # off plan but NOT routed: ignored
                      [7.0, 7.0, 7.0]])    # routed, no expert plan (NaN): ignored
    mask = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]], float)
    q = np.array([True, True, True, False, True])
    plan = np.array([1.0, 0.0, 0.0, 0.0, nan])
    out = delta_by_plan(delta, mask, q, plan)
    assert out["on_plan_token_mean"] == pytest.approx(0.5)
    assert out["off_plan_token_mean"] == pytest.approx((-1.0 + 0.2 + 0.4) / 3)
    assert out["off_plan_neg_frac"] == pytest.approx(0.5)
    assert (out["on_plan_steps"], out["off_plan_steps"]) == (1, 2)
    empty = delta_by_plan(delta, mask, np.zeros(5, bool), plan)
    assert np.isnan(empty["on_plan_token_mean"]) and np.isnan(empty["off_plan_neg_frac"])
