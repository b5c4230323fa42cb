"""The self-teacher gap probe (opid_rllib/eval/gap.py, `opid-gap`): the teacher plays exactly the skills OPID's re-score
would insert, on the same tasks and seeds, and the numbers it reports are the plays' own."""

import json

import pytest

from opid_rllib.cli.gap import main as gap_main
from opid_rllib.eval.gap import SIGNAL_POINTS, verdict

HOUSES = dict(signs="hidden", houses=True, wrong_door_leads_on=True, n_rooms=3, max_steps=3)


def _config(**training):
    from opid_rllib.algorithm import OPIDConfig

    cfg = OPIDConfig().environment("signpost", env_config=HOUSES).llm(llm_model="tiny", max_new_tokens=16, max_steps=3)
    return cfg.training(**(training or {"episode_skill_adv_weight": 0.1, "step_skill_adv_weight": 0.1})) \
        .analyzer_settings(analyzer="hindsight", analyzer_config={"quote_sampled": False})


def test_verdict_names_the_gap_and_what_to_expect():
    assert "has signal" in verdict(SIGNAL_POINTS, 10.0, 10.0 + SIGNAL_POINTS)
    line = verdict(-70.0, 79.0, 9.0)
    assert "-70.0 points" in line and "track GRPO or fall behind" in line


def test_teacher_play_inserts_each_steps_route_and_nothing_past_its_end():
    from opid_rllib.env_runner import GroupedTextEnvRunner

    runner = GroupedTextEnvRunner(config=_config())
    try:
        routes = [[(None, "STEP-ZERO"), ("EPISODE-ONE", None)], []]
        eps = runner.sample_groups(["signpost-train-1", "signpost-train-2"], explore=False, analyze=False,
                                   group_size=1, temperature=1.0, seed=0, skill_routes=routes)
        first = eps[0].get_extra_model_outputs("prompt")
        assert len(first) == 3
        assert "[STEP-ZERO]" in first[0] and "EPISODE-ONE" not in first[0]
        assert "[EPISODE-ONE]" in first[1] and "STEP-ZERO" not in first[1]
        assert "Skill" not in first[2]  # the route list ended: a plain prompt
        assert not any("Skill" in p for p in eps[1].get_extra_model_outputs("prompt"))
        with pytest.raises(ValueError, match="skill_routes"):
            runner.sample_groups(["signpost-train-1"], group_size=2, skill_routes=[[]])
    finally:
        runner.stop()


def test_measure_gap_reports_both_plays_and_delta_by_plan():
    from opid_rllib.eval.gap import measure_gap

    res = measure_gap(_config(), ["signpost-train-1", "signpost-train-2"] * 2, batch_envs=4, log=None)
    assert res["episodes"] == 4 and res["analysed_trajectories"] == 4
    assert res["gap_points"] == pytest.approx(res["teacher_success_pct"] - res["student_success_pct"])
    d = res["delta"]
    # every routed step is on or off the expert's plan (Signpost always has one)
    assert d["on_plan"]["steps"] + d["off_plan"]["steps"] == d["all"]["steps"] > 0
    assert d["episode_skill"]["steps"] + d["step_skill"]["steps"] == d["all"]["steps"]
    assert res["routing"]["mode"] == "critical_first" and res["verdict"]


@pytest.mark.parametrize("training, match", [
    ({"episode_skill_adv_weight": 0.0, "step_skill_adv_weight": 0.0}, "both skill weights are 0"),
])
def test_measure_gap_refuses_a_config_that_routes_no_skill(training, match):
    from opid_rllib.eval.gap import measure_gap

    with pytest.raises(ValueError, match=match):
        measure_gap(_config(**training), ["signpost-train-1"], log=None)
    with pytest.raises(ValueError, match="analyzer='none'"):
        measure_gap(_config().analyzer_settings(analyzer="none"), ["signpost-train-1"], log=None)


def test_cli_prints_the_gap_and_writes_json(tmp_path, capsys):
    out = tmp_path / "gap.json"
    rc = gap_main(["--env", "signpost", "--model", "tiny", "--tasks", "signpost-train-1,signpost-train-2",
                   "--max-steps", "3", "--max-new-tokens", "16", "--episode-skill-adv-weight", "0.1",
                   "--step-skill-adv-weight", "0.1", *sum((["--env-config", f"{k}={json.dumps(v)}"]
                                                           for k, v in HOUSES.items() if k != "max_steps"), []),
                   "--analyzer-option", "quote_sampled=false", "--oracle", "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    res = json.loads(out.read_text())
    assert f"gap {res['gap_points']:+.1f} points" in printed and "verdict: " in printed
    assert res["episodes"] == 2 and res["model"] == "tiny"
    assert res["routing"]["analyzer"] == "hindsight"  # the research switch went through, as opid-train's does
    # the ceiling: a third play with the expert's next command as the skill at every step
    assert 0.0 <= res["oracle_success_pct"] <= 100.0
    assert f"oracle (the expert's next command as the skill at every step): {res['oracle_success_pct']:.1f} %" in printed


def test_cli_errors_name_the_fix(capsys):
    assert gap_main([]) == 2
    assert "--example NAME, or both --env and --model" in capsys.readouterr().err
    assert gap_main(["--env", "signpost", "--model", "tiny", "--tasks", "1", "--analyzer", "none"]) == 2
    assert "analyzer='none'" in capsys.readouterr().err
    assert gap_main(["--example", "signpost_skills", "--base", "smollm2"]) == 2
    assert "--base, --copies: only with --example alfworld_rung1" in capsys.readouterr().err


def test_rung1_gap_setup_names_its_bases():
    from tuned_examples.alfworld_rung1 import SMOLLM2_WARM_START, gap_setup

    with pytest.raises(ValueError, match="base='smollm3': choose 'tiny' or 'smollm2'"):
        gap_setup(base="smollm3")
    # the SmolLM2 base is a pretrained model's skill-literate warm start at its own lr, not the tiny model's recipe
    assert SMOLLM2_WARM_START["model"] == "smollm2-135m" and SMOLLM2_WARM_START["lr"] < 1e-3
