"""bench/learning_gap.py's summary and the tuned example's curve measures, on hand-made runs."""

import pytest

from bench.learning_gap import summarize, tables
from tuned_examples.signpost_skills import curve_area, iters_ratio


def test_curve_area_holds_the_last_window_after_an_early_stop():
    assert curve_area([0.0, 0.5, 1.0], 3) == pytest.approx(50.0)
    # stopped at iteration 3 of a 5-iteration budget: the last 3 iterations' mean (0.5) fills the rest
    assert curve_area([0.0, 0.5, 1.0], 5) == pytest.approx(100 * (1.5 + 0.5 + 0.5) / 5)
    assert curve_area([], 4) == 0.0


def test_iters_ratio_counts_the_budget_for_a_run_that_never_reaches_the_target():
    assert iters_ratio({"iters_to_target": 5}, {"iters_to_target": 10}, 20) == 0.5
    assert iters_ratio({"iters_to_target": 5}, {"iters_to_target": None}, 20) == 0.25
    assert iters_ratio({"iters_to_target": None}, {"iters_to_target": 10}, 20) == 2.0


def _run(h, arm, seed, curve, reached=None):
    return {"file": f"run-h{h:g}-{arm}-seed{seed}.json", "hint_share": h, "arm": arm, "seed": seed, "curve": curve,
            "iters_to_target": reached}


def test_summary_compares_each_arm_with_grpo_on_the_same_seed_and_builds_the_law():
    items = [
        {"file": "gap-h1.json", "hint_share": 1.0, "gap_points": 40.0},
        {"file": "gap-h0.json", "hint_share": 0.0, "gap_points": -3.0},
        _run(1.0, "grpo", 0, [0.0, 0.0, 0.0, 0.0]), _run(1.0, "grpo", 1, [0.0, 0.0, 0.5, 1.0]),
        _run(1.0, "opid", 0, [0.0, 1.0, 1.0, 1.0], 4), _run(1.0, "opid", 1, [0.5, 1.0, 1.0], 3),
        _run(1.0, "content_free", 0, [0.0, 0.0, 0.25, 0.25]),
        _run(0.0, "grpo", 0, [0.0, 0.5, 0.5, 0.5]), _run(0.0, "opid", 0, [0.0, 0.25, 0.25, 0.25]),
        _run(1.0, "grpo_lr1e-4", 0, [0.0, 0.0, 0.0, 0.25]), _run(1.0, "opid_lr1e-4", 0, [0.5, 1.0, 1.0], 3),
    ]
    s = summarize(items, budget=4, rung1_gate={"base": "rung 1", "gap_points": -70, "opid_minus_grpo_auc": -5.3,
                                              "per_seed": [-2.8, -10.1, -3.1]})
    assert s["signpost_gap_points"] == 40.0 and s["seeds"] == [0, 1]
    # GRPO never reaches the target (its budget, 4, counts); OPID at 4 and 3
    assert s["signpost_opid_iters_ratio"] == [1.0, 0.75]
    # seed 1: OPID stopped at 3 iterations, its last window (0.5, 1, 1) fills the budget
    assert s["signpost_opid_auc_minus_grpo_per_seed"] == [75.0, round(100 * (2.5 + 2.5 / 3) / 4 - 37.5, 2)]
    assert s["signpost_contentfree_auc_minus_grpo"] == 12.5  # seed 0 only: the arm did not run on seed 1
    assert s["signpost_shuffled_auc_minus_grpo"] is None
    # the fix round's arms are set against GRPO at their own lr, not reported as arms against GRPO at 2e-4
    assert s["signpost_opid_lr1e-4_iters_ratio"] == [0.75]
    assert s["signpost_opid_lr1e-4_auc_minus_grpo_lr1e-4_per_seed"] == [round(100 * (2.5 + 2.5 / 3) / 4 - 6.25, 2)]
    assert not any(k.startswith(("signpost_grpo_lr", "signpost_opid_lr1e-4_auc_minus_grpo_per")) for k in s)
    law = {row["base"]: row for row in s["law"]}
    assert law["signpost hint share 0"] == {"base": "signpost hint share 0", "gap_points": -3.0,
                                            "opid_minus_grpo_auc": -18.75, "per_seed": [-18.75]}
    assert law["rung 1"]["gap_points"] == -70


def test_tables_quote_each_gap_and_each_runs_figures():
    delta = {"off_plan": {"delta_per_token": -0.454, "steps": 232}, "on_plan": {"delta_per_token": None, "steps": 0}}
    items = [{"file": "gap-h1.json", "hint_share": 1.0, "episodes": 64, "student_success_pct": 0.0,
              "teacher_success_pct": 95.31, "gap_points": 95.31, "delta": delta},
             {"file": "gap-rung1-smollm2.json", "hint_share": 1.0, "base": "smollm2", "episodes": 24,
              "student_success_pct": 25.0, "teacher_success_pct": 50.0, "gap_points": 25.0,
              "oracle_success_pct": 75.0, "delta": delta},
             dict(_run(1.0, "opid", 0, [0.0, 1.0, 1.0, 1.0], 4), seconds=281.5),
             dict(_run(1.0, "grpo", 1, [0.0, 0.0, 0.0, 0.0]), seconds=450.0)]
    out = tables(items, budget=4).splitlines()
    assert "| signpost hint share 1 | 64 | 0.0 % | 95.3 % | +95.3 | - | -0.454 (232) | - |" in out
    assert "| alfworld rung 1 (smollm2) | 24 | 25.0 % | 50.0 % | +25.0 | 75.0 % | -0.454 (232) | - |" in out
    assert "| 1 | opid | 4 / 75.0 / 282 | - |" in out and "| 1 | grpo | - | never / 0.0 / 450 |" in out


@pytest.mark.parametrize("student, teacher, met", [(16.67, 16.67, False), (25.0, 50.0, True), (10.0, 40.0, False)])
def test_summary_checks_smollm2_against_part_4s_gap_target(student, teacher, met):
    gap = {"file": "gap-rung1-smollm2.json", "hint_share": 1.0, "student_success_pct": student,
           "teacher_success_pct": teacher, "gap_points": round(teacher - student, 2), "oracle_success_pct": 87.5}
    s = summarize([gap], budget=4)
    assert s["smollm2_gap_points"] == gap["gap_points"] and s["smollm2_gap_target_met"] is met
    assert s["smollm2_oracle_gap_points"] == round(87.5 - student, 2)
    assert ("smollm2_comparison" in s) is not met
