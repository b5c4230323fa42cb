"""studies/play_phases.py: ill-formed commands and picking the task's object up, from a run's or an eval's episodes."""

from __future__ import annotations

import json

import pytest

from studies import comparisons, play_phases

TASK = "pick_heat_then_place_in_recep-Tomato-None-CounterTop-10/trial_1"


def _ep(actions, plans, won=False, task_id=TASK):
    return {"task_id": task_id, "won": won, "length": len(actions), "actions": actions, "expert_next": plans}


EPISODES = [
    # the plan's own take, then the plan moves on: picked up, won
    _ep(["go to countertop 1", "take tomato 1 from countertop 1", "heat tomato 1 with microwave 1"],
        ["go to countertop 1", "take tomato 1 from countertop 1", "go to microwave 1"], won=True),
    # a take off the plan the game refused: the plan stays the same, so not picked up
    _ep(["take tomato 2 from fridge 1", "go to fridge 1"], ["go to countertop 1", "go to countertop 1"]),
    # a take off the plan the game accepted (another tomato): the plan changed after it
    _ep(["take tomato 2 from sinkbasin 1", "go to cabinet 1"], ["go to countertop 1", "go to microwave 1"]),
    # ill-formed: no instance number, and a take of another object class (not the task's)
    _ep(["take tomato from countertop 1", "take  apple 1 from countertop 1", "go to countertop 1"],
        ["take tomato 1 from countertop 1", "take tomato 1 from countertop 1", "go to countertop 1"]),
]


def test_counts_pick_ups_read_off_the_plan_and_ill_formed_commands():
    pp = play_phases
    assert pp.well_formed("move tomato 1 to countertop 2") and pp.well_formed("look")
    assert not pp.well_formed("take tomato from countertop 1") and not pp.well_formed("go to sidethe couch")
    assert [pp.picked_up(e) for e in EPISODES] == [True, False, True, False]
    row = pp.count(EPISODES)
    assert row == {"games": 4, "won": 1, "commands": 10, "takes": 5, "ill_formed": 1, "ill_formed_takes": 1,
                   "ill_formed_object_takes": 1, "games_with_ill_formed": 1, "picked_up": 2, "won_after_pick_up": 1}
    other = _ep(["take apple from countertop 1", "take tomato from fridge 1", "take tomato", "take tomatoes"],
                ["look"] * 4)
    assert pp.count([other])["ill_formed_object_takes"] == 2  # the apple is not the task's object
    with pytest.raises(ValueError, match="ALFWorld"):
        pp.picked_up(_ep(["take x 1 from y 1"], ["take x 1 from y 1"], task_id="q17"))


def test_reads_a_run_folder_and_an_eval_folder_and_labels_the_arm(tmp_path, capsys):
    pp = play_phases
    run = tmp_path / "runs" / "opid_w-s1"
    (run / "opid_skills").mkdir(parents=True)
    old = {"key": "old", "chunk": 0, "task_ids": [TASK], "records": [EPISODES[0]] * 3}
    lines = [old] + [{"key": "k", "chunk": k, "task_ids": [TASK], "records": [e]} for k, e in enumerate(EPISODES)]
    text = "\n".join(json.dumps(x) for x in lines) + '\n{"key": "k", "chunk": 9, "reco'  # a line cut by a kill
    (run / "play_chunks.jsonl").write_text(text)
    (run / "opid_skills" / "iter_00002.jsonl").write_text(
        "\n".join(json.dumps({"actions": e["actions"], "won": e["won"]}) for e in EPISODES[2:]) + "\n")
    routed = {"actions": ["take tomato 1 from countertop 1", "take tomato 2 from fridge 1", "take  x 1 from y 1",
                          "go to fridge 1", "take tomato 1 from countertop 1", "take apple from countertop 1"],
              "routed": ["step", "episode+step", "step", "step", "episode", "step"],
              "on_plan": [True, False, False, False, False, None], "won": False,
              "skills": {"episode_skill": "Goal: x. Core mistake: chose 'go to fridge 1' instead of 'look'. Avoid "
                                          "looping: 'take apple from countertop 1' was repeated. 'take tomato 2 from "
                                          "fridge 1' had no effect."}}
    (run / "opid_skills" / "iter_00003.jsonl").write_text(json.dumps(routed) + "\n")
    grpo = dict(routed, routed=[None] * 6, skills=None)  # GRPO's dumps: no skills, so no step-skill or quote column
    (run / "opid_skills" / "iter_00004.jsonl").write_text(json.dumps(grpo) + "\n")
    t_arm = "opid:" + comparisons.T_SETTINGS
    (tmp_path / "runs" / "opid_w-s1.json").write_text(json.dumps({"variant": t_arm, "seed": 1}))
    ev = tmp_path / "eval"
    ev.mkdir()
    (ev / "episodes.jsonl").write_text(json.dumps(EPISODES[0]) + "\n")

    found = pp.rows(run)
    assert [w for w, _ in found] == ["panel play", "training iteration 2", "training iteration 3",
                                     "training iteration 4"]
    assert found[0][1]["games"] == 4 and found[0][1]["picked_up"] == 2     # the old key's 3 games are not read
    assert found[1][1] == {"games": 2, "won": 0, "commands": 5, "takes": 3, "ill_formed": 1, "ill_formed_takes": 1,
                           "ill_formed_object_takes": None,  # these rows name no task
                           "games_with_ill_formed": 1}                 # no plans in training dumps
    # one take on the plan and two off it; a 'go to', an episode-routed take and one with no plan are not counted
    assert found[2][1]["step_skill_takes"] == {"on_plan": 1, "off_plan": 2}
    assert "step_skill_takes" not in found[3][1] and "episode_skill_quotes" not in found[3][1]
    # the ill-formed take and two other commands are quoted in the episode's skill; the on-plan take is not
    assert found[2][1]["episode_skill_quotes"] == {"ill_formed": 1, "ill_formed_of": 1, "on_plan": 0, "on_plan_of": 1,
                                                   "other": 2, "other_of": 4}
    assert pp.main([str(run), str(ev), "--json", str(tmp_path / "out.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "| T s1 panel play | 4 | 1 | 2 | 1 | 10 | 50.0 (5) | 10.0 (1) | 1 | 1 | 1 | - | - |"
    assert out[3] == "| T s1 training iteration 2 | 2 | 0 | - | - | 5 | 60.0 (3) | 20.0 (1) | 1 | - | 1 | - | - |"
    assert out[4].endswith("| 1 / 2 | 100.0 / 0.0 / 50.0 |")
    assert out[5].endswith("| - | - |")
    assert out[6] == "| eval opid-eval student | 1 | 1 | 1 | 1 | 3 | 33.3 (1) | 0.0 (0) | 0 | 0 | 0 | - | - |"
    assert json.loads((tmp_path / "out.json").read_text())[str(ev)]["opid-eval student"]["picked_up"] == 1
    with pytest.raises(SystemExit, match="neither"):
        pp.rows(tmp_path / "nothing")
    running = tmp_path / "runs" / (t_arm + "+analyzer.quote_sampled=false-s0").replace(":", "_").replace("+", "_")
    assert pp.label(running) == "T+unquoted s0"  # no record yet: the folder's name, shortened alike
    shuffled = tmp_path / "runs" / (t_arm + "+shuffle_skills=true-s0").replace(":", "_").replace("+", "_")
    assert pp.label(shuffled) == "T+shuffle_skills=true s0"
    assert pp.label(tmp_path / "runs" / "grpo-s2") == "grpo s2" and pp.label(ev) == "eval"
    (tmp_path / "runs" / "base-s0.json").write_text(json.dumps({"success_pct": {"all": 11.9}}))
    assert pp.label(tmp_path / "runs" / "base-s0") == "base s0"  # a base play's record names no arm


def test_a_skill_quotes_a_command_as_the_analyzer_writes_it():
    """The analyzer folds whitespace and cuts long commands before quoting them; a literal '...' match would count
    such a command, quoted in its episode skill, as unquoted."""
    from opid_rllib.analyzer import HindsightAnalyzer, StepRecord, TrajectoryRecord
    from opid_rllib.analyzer.hindsight import MAX_QUOTE_CHARS

    pp = play_phases
    long_cmd = "put " + "very " * 20 + "long mug 1 in/on shelf 1"
    assert len(long_cmd) > MAX_QUOTE_CHARS
    for off_plan in (long_cmd, "go  to   cabinet 1"):
        rows = [("go to countertop 1", "go to countertop 1"), (off_plan, "take mug 1 from countertop 1"),
                ("go to shelf 1", "take mug 1 from countertop 1")]
        steps = [StepRecord(index=i, observation="You are in the middle of a room.",
                            response=f"<think>ok</think><action>{a}</action>", action=a, action_valid=True,
                            reward=0.0, ret=0.0, admissible_actions=[a, "go to shelf 1"], expert_actions=[e])
                 for i, (a, e) in enumerate(rows)]
        traj = TrajectoryRecord(traj_id="t", group_id="g", task_id="alfworld/mug", task="put a mug in shelf.",
                                task_type="pick_and_place_simple", env_name="alfworld", success=False,
                                episode_reward=0.0, steps=steps, ground_truth={})
        skill = HindsightAnalyzer().analyze(traj).episode_skill
        assert "chose '" in skill and f"'{off_plan}'" not in skill  # quoted, but a literal match misses it ...
        assert pp.quoted_in(skill, off_plan)  # ... the analyzer's own quoting finds it
        assert not pp.quoted_in(skill, "go to countertop 1")  # on the plan: named, not quoted
        assert not pp.quoted_in(skill, "go to shelf 2")
