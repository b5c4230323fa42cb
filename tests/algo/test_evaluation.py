"""Validation during training (opid_rllib/evaluation.py): config.evaluation(...) plays a panel without skills.

Real RLlib algorithms, the real tiny model and the real searchqa env; the opid-eval side is opid-eval's own
entry point (eval/panel.py)."""

from __future__ import annotations

import math
import os

import pytest
import torch

from helpers import tiny_config
from opid_rllib.config_checks import config_errors
from opid_rllib.evaluation import evaluation_metrics

PANEL = "searchqa/smoke@v1"


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def _eval_config(**evaluation):
    return tiny_config("searchqa").evaluation(**{**dict(evaluation_interval=1, evaluation_duration=4,
                                                        eval_panel=PANEL, eval_batch_envs=2, eval_seed=5),
                                                 **evaluation})


def test_bad_evaluation_settings_are_refused_in_one_line_each():
    cases = {
        "eval_panel='nope@v1': unknown panel": dict(eval_panel="nope@v1"),
        "eval_panel='alfworld/smoke@v1': a alfworld panel, but env is 'searchqa'": dict(eval_panel="alfworld/smoke@v1"),
        "eval_task_ids: eval_panel already names the games": dict(eval_task_ids=["a"]),
        "evaluation_duration=100 (timesteps): OPID evaluates whole games": dict(evaluation_duration_unit="timesteps",
                                                                               evaluation_duration=100),
        "eval_batch_envs=0: must be an int >= 1": dict(eval_batch_envs=0),
        "eval_seed=-1: must be an int >= 0": dict(eval_seed=-1),
    }
    for want, change in cases.items():
        errors = config_errors(_eval_config(**change))
        assert len(errors) == 1 and errors[0].startswith(want), (want, errors)
        assert "\n" not in errors[0]
    typo = config_errors(_eval_config(eval_seed="5"))
    assert typo == ["eval_seed='5': expected int"]  # named once, by the type check
    assert config_errors(_eval_config(eval_panel=None, eval_task_ids=[]))[0].startswith("eval_task_ids=[]: must be")
    off = tiny_config("searchqa").evaluation(eval_final_iteration=3)
    assert config_errors(off) == ["eval_final_iteration=3: evaluation is off; set "
                                  "config.evaluation(evaluation_interval=N) as well"]
    assert config_errors(_eval_config()) == []
    with pytest.raises(ValueError, match="eval_panel='nope@v1'"):
        _eval_config(eval_panel="nope@v1").validate()


def test_evaluation_metrics_are_the_eval_table_as_numbers():
    recs = [{"task_type": "single_hop", "won": True, "length": 2, "reward": 1.0, "format_valid": [True, True]},
            {"task_type": "multi_hop", "won": False, "length": 4, "reward": 0.0, "format_valid": [True, False, True, True]}]
    m = evaluation_metrics(recs, "searchqa", temperature=0.4, wall_s=1.5, panel=PANEL)
    assert m["success_rate"] == 0.5 and m["success_pct"] == {"multi_hop": 0.0, "single_hop": 100.0, "Avg": 50.0,
                                                             "All": 50.0}
    assert m["mean_episode_length"] == 3.0 and m["format_valid_pct"] == pytest.approx(500 / 6, abs=0.01)
    assert m["env_runners"] == {"episode_return_mean": 0.5, "episode_len_mean": 3.0, "num_episodes": 2}
    assert m["episodes"] == 2 and m["temperature"] == 0.4 and m["panel"] == PANEL
    assert math.isnan(evaluation_metrics([], "searchqa", temperature=0.4, wall_s=0.0)["success_rate"])


@pytest.mark.ray
@pytest.mark.slow
def test_a_sweep_ranks_on_the_final_evaluation_and_asha_reads_it(tmp_path):
    """A Tune grid whose scheduler's metric is evaluation/success_rate: every trial reports it, ASHA runs on it,
    and sweep.json ranks the points on each trial's final evaluation. The file's first Ray test: the session that
    run_experiment starts is its own, and it is shut down at the end (the other tests join the file's session)."""
    import json

    import ray
    from ray import tune

    from opid_rllib.cli.train import run_experiment

    assert not ray.is_initialized()
    cfg = tiny_config("searchqa", max_steps=2, tasks_per_iter=1, max_new_tokens=8)
    cfg.episode_skill_adv_weight = tune.grid_search([0.0, 0.01])
    rc = run_experiment(cfg, ["--stop-iters", "2", "--eval-interval", "1", "--eval-panel", PANEL, "--eval-episodes",
                              "2", "--asha-grace", "1", "--num-cpus", "2", "--verbose", "0", "--output", str(tmp_path)])
    assert rc == 0 and not ray.is_initialized()  # the session it started is gone (a caller's stays: test_train_e2e)
    sel = json.load(open(tmp_path / "sweep.json"))
    assert sel["metric"] == "evaluation/success_rate" and sel["scope"] == "final evaluation"
    assert len(sel["trials"]) == 2
    for t in sel["trials"]:
        with open(os.path.join(t["path"], "result.json")) as f:
            rows = [json.loads(line) for line in f]
        assert [r["evaluation"]["evaluated_at_iteration"] for r in rows] == [1, 2][:len(rows)]
        assert t["history"] == [rows[-1]["evaluation"]["success_rate"]]


@pytest.mark.ray
@pytest.mark.slow
def test_in_training_evaluation_equals_opid_eval_on_the_same_weights(ray_local, tmp_path):
    """Two remote evaluation runners split the chunks; the records equal one opid-eval play of the saved weights
    (same panel, episodes, seed and chunking), so the curve can be trusted. Evaluation runs with no analyzer and
    no skills, in the training iteration's result under evaluation/."""
    from opid_rllib.eval.panel import evaluate
    from opid_rllib.export import save_policy

    algo = _eval_config(evaluation_num_env_runners=2, evaluation_duration=5).build_algo()
    try:
        result = algo.train()
        ev = result["evaluation"]
        assert ev["episodes"] == 5 and ev["panel"] == PANEL and ev["evaluated_at_iteration"] == 1
        assert ev["temperature"] == algo.config.eval_temperature == 0.4
        assert algo.evaluation_config.analyzer == "none" and algo.evaluation_config.env_config["split"] == "test"
        weights = {k: v.clone() for k, v in algo.learner_group._learner.module["default_policy"].model.state_dict().items()}
        module = algo.env_runner_group.local_env_runner.module
        module.model.load_state_dict(weights)
        save_policy(module, tmp_path / "policy")
        direct = evaluate({"llm_model": str(tmp_path / "policy"), "max_new_tokens": 12, "max_prompt_len": 512,
                           "history_length": 2, "max_steps": 3}, panel=PANEL, episodes=5, seed=5, batch_envs=2,
                           progress=False)
        played = algo.last_evaluation_episodes
        again = algo.evaluate()
        replayed = algo.last_evaluation_episodes
    finally:
        algo.stop()
    assert direct["config"]["temperature"] == 0.4
    assert ev["success_pct"] == {k: v for k, v in direct["table"]["success_pct"].items() if v is not None}
    assert ev["mean_episode_length"] == direct["table"]["mean_episode_length"]
    assert ev["format_valid_pct"] == direct["table"]["format_valid_pct"]
    # episode for episode: the same games, responses and outcomes (chunk k samples with seed + k on any runner)
    keys = ("task_id", "responses", "actions", "won", "length")
    assert [[r[k] for k in keys] for r in played] == [[r[k] for k in keys] for r in direct["episodes"]]
    assert len({tuple(r["responses"]) for r in played}) > 1  # not one degenerate play repeated
    assert [r["responses"] for r in replayed] == [r["responses"] for r in played]
    assert again["evaluated_at_iteration"] == 2


@pytest.mark.ray
def test_evaluation_does_not_change_what_training_learns(ray_local):
    """Two iterations with and without evaluation (on the driver's own eval runner, which shares its random
    generators) train the same weights; an iteration without evaluation carries the latest one."""
    def train(cfg):
        algo = cfg.build_algo()
        try:
            results = [algo.train() for _ in range(3)]
            w = {k: v.clone() for k, v in algo.learner_group._learner.module["default_policy"].model.state_dict().items()}
        finally:
            algo.stop()
        return results, w

    plain, w_plain = train(tiny_config("searchqa"))
    evald, w_eval = train(_eval_config(evaluation_interval=2))
    assert "evaluation" not in plain[-1]
    assert "evaluation" not in evald[0]
    assert [r["evaluation"]["evaluated_at_iteration"] for r in evald[1:]] == [2, 2]  # iteration 3 carries 2's
    assert [r["opid"]["success_rate"] for r in plain] == [r["opid"]["success_rate"] for r in evald]
    assert w_plain.keys() == w_eval.keys()
    for k in w_plain:
        assert torch.equal(w_plain[k], w_eval[k]), k


@pytest.mark.ray
def test_opid_train_eval_flags_log_evaluation_to_results_tensorboard_and_the_report(ray_local, tmp_path):
    """--eval-interval 2 with --stop-iters 3: iterations 2 and 3 (the last) are evaluated; result.json carries
    evaluation/ in RLlib's layout, TensorBoard has the curve at the iterations measured, opid-report draws it."""
    import json

    from helpers import scalar_steps
    from opid_rllib.cli.train import main
    from opid_rllib.report.html import report_run

    rc = main(["--env", "searchqa", "--cpu-example", "--stop-iters", "3", "--max-steps", "2", "--tasks-per-iter", "1",
               "--group-size", "2", "--max-new-tokens", "8", "--no-tune", "--num-cpus", "2", "--output", str(tmp_path),
               "--eval-interval", "2", "--eval-panel", PANEL, "--eval-episodes", "3"])
    assert rc == 0
    rows = [json.loads(line) for line in open(tmp_path / "result.json")]
    assert "evaluation" not in rows[0]
    assert [r["evaluation"]["evaluated_at_iteration"] for r in rows[1:]] == [2, 3]
    ev = rows[-1]["evaluation"]
    assert ev["episodes"] == ev["env_runners"]["num_episodes"] == 3 and ev["panel"] == PANEL
    assert 0.0 <= ev["success_rate"] <= 1.0 and ev["temperature"] == 0.4
    assert scalar_steps(tmp_path, "evaluation/success_rate") == [2, 3]
    made = report_run(tmp_path, tmp_path / "report")
    assert (tmp_path / "report" / "evaluation.png").is_file(), made


@pytest.mark.ray
def test_fresh_seeds_give_each_evaluation_its_own_draws(ray_local):
    """eval_fresh_seeds: the evaluation after iteration i samples from eval_seed + i * chunks (the learning gate's
    fresh seeds); by default every evaluation draws the same (curves differ by the weights only)."""
    def two_plays(**kw):
        algo = _eval_config(**kw).build_algo()
        try:
            algo.evaluate()
            first = [r["responses"] for r in algo.last_evaluation_episodes]
            algo._iteration = 1  # as after one training iteration (no update: the same weights)
            algo.evaluate()
            return first, [r["responses"] for r in algo.last_evaluation_episodes]
        finally:
            algo.stop()

    first, second = two_plays()
    assert first == second
    first, second = two_plays(eval_fresh_seeds=True)
    assert first != second
