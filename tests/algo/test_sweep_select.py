"""Sweep selection: rank points by mean training success; a tie is reported as a tie, not a pick."""

import math

from opid_rllib.sweep_select import rank_trials, ranking_text, trial_score


def test_score_is_the_mean_of_finite_values():
    assert trial_score([0.0, 0.5, 1.0]) == 0.5
    assert trial_score([0.25, float("nan"), None, 0.75]) == 0.5
    assert math.isnan(trial_score([]))


def test_best_point_by_mean_over_iterations_not_last_value():
    trials = [{"params": {"w": 0.01}, "history": [0.0, 0.0, 0.5]},   # mean 0.167, best last value
              {"params": {"w": 0.1}, "history": [0.25, 0.25, 0.25]},  # mean 0.25
              {"params": {"w": 0.0}, "history": []}]                  # no metric: ranked last, unscored
    sel = rank_trials(trials)
    assert sel["best"] == {"w": 0.1} and sel["informative"] and sel["tied"] == [{"w": 0.1}]
    assert [r["params"]["w"] for r in sel["ranking"]] == [0.1, 0.01, 0.0]
    assert "best: w=0.1" in ranking_text(sel)


def test_all_zero_sweep_is_a_tie_not_a_selection():
    trials = [{"params": {"w": w}, "history": [0.0, 0.0]} for w in (0.0, 0.01, 0.1)]
    sel = rank_trials(trials)
    assert not sel["informative"] and len(sel["tied"]) == 3
    assert "3 points tie" in ranking_text(sel)
    none = rank_trials([{"params": {"w": 1}, "history": []}])
    assert none["best"] is None and "nothing selected" in ranking_text(none)


def test_grid_points_are_every_combination_of_the_grids():
    from ray import tune

    from opid_rllib.sweep_select import grid_points, searched_keys
    from tests.algo.helpers import tiny_config

    plain = tiny_config()
    assert searched_keys(plain) == [] and grid_points(plain) == [{}]
    cfg = tiny_config(episode_skill_adv_weight=tune.grid_search([0.0, 0.1]),
                      step_skill_adv_weight=tune.grid_search([0.3, 1.0, 3.0]))
    assert sorted(searched_keys(cfg)) == ["episode_skill_adv_weight", "step_skill_adv_weight"]
    points = grid_points(cfg)
    assert len(points) == 6 and {(p["episode_skill_adv_weight"], p["step_skill_adv_weight"]) for p in points} == \
        {(e, s) for e in (0.0, 0.1) for s in (0.3, 1.0, 3.0)}


def test_every_trial_gets_a_seed_and_repeats_get_their_own():
    """A tuned example's config leaves RLlib's seed None (unseeded: two runs of one sweep ranked different draws);
    seed_trials gives it --seed's default 0, and N repeats of a point seeds seed .. seed + N - 1."""
    import runpy
    from pathlib import Path

    from ray import tune

    from opid_rllib.sweep_select import grid_points, searched_keys, seed_trials

    example = Path(__file__).resolve().parents[2] / "tuned_examples" / "alfworld_opid_weight_sweep.py"
    cfg = runpy.run_path(str(example), run_name="x")["config"]
    assert cfg.seed is None  # what RLlib leaves: the case this guards
    assert seed_trials(cfg, 1) == 1 and cfg.seed == 0
    assert searched_keys(cfg) == ["episode_skill_adv_weight", "step_skill_adv_weight"]  # seed 0 is no grid

    cfg.seed = 5  # --seed 5 --num-samples 3: one trial per (point, seed), no two repeats alike
    assert seed_trials(cfg, 3) == 1 and cfg.seed == {"grid_search": [5, 6, 7]}
    assert len(grid_points(cfg)) == 9 * 3 and {p["seed"] for p in grid_points(cfg)} == {5, 6, 7}

    cfg.seed = tune.grid_search([1, 2])  # a config that searches seeds itself keeps its grid and the repeats
    assert seed_trials(cfg, 2) == 2 and cfg.seed == {"grid_search": [1, 2]}


def test_repeats_of_a_point_are_averaged_not_ranked_apart():
    """--num-samples 2 runs each point under seeds 0 and 1: the point scores the mean of its seeds, and the luckiest
    single seed does not win (ranked per trial, w=0.1's seed 1 at 0.5 would beat w=0.01's steady 0.3)."""
    trials = [{"params": {"w": 0.1, "seed": 0}, "history": [0.0, 0.0]},
              {"params": {"w": 0.1, "seed": 1}, "history": [0.5, 0.5]},
              {"params": {"w": 0.01, "seed": 0}, "history": [0.3, 0.3]},
              {"params": {"w": 0.01, "seed": 1}, "history": [0.2, 0.4]},
              {"params": {"w": 0.0, "seed": 0}, "history": [0.6]},
              {"params": {"w": 0.0, "seed": 1}, "history": []}]  # a failed repeat: the point's mean is its other seed
    sel = rank_trials(trials)
    assert sel["best"] == {"w": 0.0} and sel["informative"]
    assert [(r["params"], round(r["score"], 6)) for r in sel["ranking"]] == \
        [({"w": 0.0}, 0.6), ({"w": 0.01}, 0.3), ({"w": 0.1}, 0.25)]
    w01 = sel["ranking"][1]
    assert [(x["seed"], round(x["score"], 6)) for x in w01["repeats"]] == [(0, 0.3), (1, 0.3)]
    assert "mean of seed 0: 0.3000, seed 1: 0.3000" in ranking_text(sel)
    assert "0.6000  (1 iters; mean of seed 0: 0.6000, seed 1: nan; 1 of 2 repeats unscored)" in ranking_text(sel)
    # equal means over different seeds are a tie, whatever order the floats were summed in
    tie = rank_trials([{"params": {"w": w, "seed": s}, "history": [h]}
                       for w, hs in ((1, (0.1, 0.2, 0.3)), (2, (0.3, 0.2, 0.1))) for s, h in enumerate(hs)])
    assert not tie["informative"] and tie["tied"] == [{"w": 1}, {"w": 2}]
