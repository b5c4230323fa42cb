"""bench/learning_gate.py's summary: areas, iterations to GRPO's final success, and the differences to GRPO."""

import pytest


@pytest.fixture()
def gate(bench_module):
    return bench_module("learning_gate")


def _run(arm, seed, curve, base=0.2):
    return {"arm": arm, "seed": seed, "curve": curve, "base": base, "wall_s": 1.0}


def test_iterations_to_a_threshold_use_the_window_mean(gate):
    assert gate.iters_to([0.1, 0.5, 0.6, 0.7], 0.6, 3) == 4       # (0.5 + 0.6 + 0.7) / 3 = 0.6
    assert gate.iters_to([0.1, 0.5, 0.6, 0.7], 0.61, 3) is None
    assert gate.iters_to([0.9, 0.9, 0.9], 0.9, 3) == 3


def test_summary_by_hand(gate):
    g = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7]           # final (last 3) 0.6, reached at iteration 6; area 45
    o = [0.5, 0.6, 0.7, 0.7, 0.7, 0.7]           # window means 0.6 at iteration 3; area 65
    c = [0.2, 0.2, 0.3, 0.4, 0.5, 0.6]           # area 36.7
    s = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1]           # area 10
    out = gate.summarize([_run("grpo", 0, g), _run("opid", 0, o), _run("content_free", 0, c),
                          _run("shuffled", 0, s)])
    sm = out["summary"]
    assert sm["grpo_minus_base"] == [40.0]
    assert sm["opid_auc_minus_grpo"] == pytest.approx(20.0)
    assert sm["opid_iters_to_threshold_ratio"] == pytest.approx(3 / 6)
    assert sm["contentfree_auc_minus_grpo"] == pytest.approx(36.67 - 45.0, abs=0.01)
    assert sm["shuffled_auc_minus_grpo"] == pytest.approx(-35.0)
    row = {r["arm"]: r for r in out["table"]}
    assert row["opid"]["iters_to_grpo_final"] == 3 and row["shuffled"]["iters_to_grpo_final"] is None


def test_an_arm_that_never_reaches_grpo_counts_the_whole_budget(gate):
    out = gate.summarize([_run("grpo", 1, [0.3, 0.5, 0.7, 0.7]), _run("opid", 1, [0.1, 0.1, 0.1, 0.1])])
    assert out["summary"]["opid_iters_to_threshold_ratio"] == pytest.approx(4 / 4)
    assert out["summary"]["contentfree_auc_minus_grpo"] is None


def test_bad_arm_is_refused_in_one_line(gate, capsys):
    with pytest.raises(SystemExit):
        gate.main(["run", "--arms", "grpo,teacher", "--out", "x"])
    assert "'teacher' is not an arm" in capsys.readouterr().err


def test_teacher_trend_and_unseen_plays_reach_the_summary(gate, tmp_path):
    """The self-teacher's on-plan share and Delta, first and last iteration; the unseen plays beside the gate."""
    import json

    teacher = [{"delta_ep/on_plan_steps": 3.0, "delta_ep/off_plan_steps": 1.0, "delta_ep/on_plan_token_mean": -0.2},
               {}, {"delta_ep/on_plan_steps": 1.0, "delta_ep/off_plan_steps": 1.0, "delta_ep/on_plan_token_mean": -0.1}]
    assert gate.teacher_trend(teacher) == {"on_plan_share_first_last": [0.75, 0.5],
                                           "on_plan_delta_first_last": [-0.2, -0.1]}
    assert gate.teacher_trend([{}, {}]) == {}
    for arm, curve in (("grpo", [0.3, 0.5, 0.6]), ("opid", [0.2, 0.4, 0.5])):
        (tmp_path / f"{arm}_s0.json").write_text(json.dumps(dict(_run(arm, 0, curve), iters=3, teacher=teacher)))
    for name, pct in (("base", 1.6), ("opid_s0", 3.2)):
        (tmp_path / f"unseen_{name}.json").write_text(json.dumps({"model": name, "success_pct": {"All": pct},
                                                                  "expert_agreement_pct": 20.0}))
    out = tmp_path / "gate.json"
    assert gate.main(["summary", str(tmp_path), "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["unseen"]["success_pct_all"] == {"base": 1.6, "opid_s0": 3.2}
    assert len(got["runs"]) == 2
    assert {r["arm"]: r.get("on_plan_share_first_last") for r in got["table"]} == {"grpo": [0.75, 0.5],
                                                                                   "opid": [0.75, 0.5]}
