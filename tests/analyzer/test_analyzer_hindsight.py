"""Deterministic hindsight skills on hand-made trajectories."""

import json

import pytest

from traj_factory import FAILURE_ROWS, SUCCESS_ROWS, make_traj

from opid_rllib.analyzer import HindsightAnalyzer, TrajectoryRecord, make_analyzer


def test_success_workflow_is_compressed(success_traj):
    s = HindsightAnalyzer(max_step_skills=5).analyze(success_traj)
    assert s.ok and s.attempts == 1
    assert s.episode_skill.startswith(
        "To put a cool mug in shelf: go to countertop 1, take mug 1 from countertop 1, go to fridge 1, "
        "cool mug 1 with fridge 1, go to shelf 1, then move mug 1 to shelf 1.")
    # the detours (look, the empty cabinet) are dropped from the workflow and counted
    assert "cabinet" not in s.episode_skill.split(".")[0]
    assert "4 of 10 steps" in s.episode_skill
    assert "succeeded" in s.episode_summary
    # step skills: where the agent left the expert's plan, earliest first
    assert s.step_skills[0] == "At this point, go to countertop 1 instead of 'look'."
    assert sorted(s.step_skills) == [0, 1, 2, 3]


def test_failure_avoidance_rules(failure_traj):
    s = HindsightAnalyzer(max_step_skills=3).analyze(failure_traj)
    assert s.ok
    sk = s.episode_skill
    assert sk.startswith("Goal: put a cool mug in shelf. Core mistake: leaving the good plan: at step 1")
    assert "'go to cabinet 1' instead of 'take mug 1 from countertop 1'" in sk
    assert "looping" in sk and "broken format in 1 of 7 replies" in sk
    assert "'fly to shelf 1'" in sk and "had no effect" in sk
    assert "The expert's first moves: go to countertop 1, then take mug 1 from countertop 1." in sk
    assert len(s.step_skills) == 3
    assert s.step_skills == {
        1: "At this point, take mug 1 from countertop 1 instead of 'go to cabinet 1'.",
        3: "At this point, take mug 1 from countertop 1 instead of 'go to cabinet 1'.",
        4: "Reply with <think>...</think> then <action>go to countertop 1</action>.",
    }
    assert "failed" in s.episode_summary and "1 invalid-format reply" in s.episode_summary


def test_format_steps_capped_when_plan_deviations_exist():
    rows = [(f"bad {i}", "Nothing happens.", "go to countertop 1", False) for i in range(5)]
    rows += [("go to cabinet 1", "The cabinet 1 is closed.", "go to countertop 1", True)]
    s = HindsightAnalyzer(max_step_skills=4).analyze(make_traj(rows, success=False))
    kinds = ["format" if v.startswith("Reply with") else "plan" for v in s.step_skills.values()]
    assert kinds.count("format") == 2 and 5 in s.step_skills


def test_no_expert_uses_loops_admissibility_and_ground_truth():
    rows = [(a, o, None, v) for a, o, _, v in FAILURE_ROWS]
    traj = make_traj(rows, success=False, env_name="searchqa",
                     ground_truth={"gold_answers": ["Paris"], "supporting_titles": ["France"], "empty": ""})
    s = HindsightAnalyzer().analyze(traj)
    assert s.ok
    assert "Check against: gold answers = Paris; supporting titles = France." in s.episode_skill
    assert "<search>query</search>" in s.episode_skill
    assert s.step_skills[2].startswith("Stop repeating 'go to countertop 1'")
    assert s.step_skills[5] == ("Issue a command from the admissible list such as 'go to shelf 1' "
                                "instead of 'fly to shelf 1'.")
    assert s.step_skills[6].startswith("Before you commit, make sure the result matches: gold answers = Paris")
    assert "expert" not in s.episode_skill


def test_skills_never_quote_a_local_path():
    """ALFWorld's ground truth names its game file under this machine's cache: a skill quoting it would
    differ between machines (and so would a warm start trained on such skills)."""
    texts = []
    for home in ("/root/.cache", "/home/ci/.cache"):
        gt = {"gamefile": f"{home}/opid_rllib/alfworld/v1/train/pick-Mug/game.tw-pddl", "object_target": "Mug"}
        s = HindsightAnalyzer().analyze(make_traj(FAILURE_ROWS, success=False, ground_truth=gt))
        texts.append(json.dumps([s.episode_skill, s.step_skills, s.episode_summary]))
    assert texts[0] == texts[1] and ".cache" not in texts[0] and "object target = Mug" in texts[0]


def test_webshop_success_drops_paging_and_abandoned_search():
    rows = [("search[red shoes]", "results", None, True), ("click[next >]", "page 2", None, True),
            ("click[back to search]", "search page", None, True), ("search[red running shoes size 9]", "r", None, True),
            ("click[b0123]", "item", None, True), ("click[description]", "desc", None, True),
            ("click[< prev]", "item", None, True), ("click[size 9]", "item", None, True),
            ("click[buy now]", "thanks", None, True)]
    s = HindsightAnalyzer().analyze(make_traj(rows, success=True, env_name="webshop", task="buy red running shoes"))
    assert s.episode_skill.startswith(
        "To buy red running shoes: search[red running shoes size 9], click[b0123], click[size 9], then click[buy now].")


def test_deterministic_and_json_roundtrip(failure_traj):
    a, b = make_analyzer("hindsight"), make_analyzer(None, max_step_skills=5)
    s1, s2 = a.analyze(failure_traj), b.analyze(TrajectoryRecord.from_dict(failure_traj.to_dict()))
    d1, d2 = s1.to_dict(), s2.to_dict()
    d1.pop("latency_s"), d2.pop("latency_s")
    assert d1 == d2
    assert json.loads(json.dumps(d1))["step_skills"]["1"].startswith("At this point")


def test_unknown_outcome_and_empty_trajectory():
    s = HindsightAnalyzer().analyze(make_traj(SUCCESS_ROWS, success=None))
    assert s.ok and "outcome unknown" in s.episode_summary and s.episode_skill.startswith("Goal:")
    empty = make_traj([], success=False)
    s = HindsightAnalyzer().analyze(empty)
    assert not s.ok and s.error == "trajectory has no steps"


def test_filled_in_command_templates_count_as_admissible():
    """WebShop/search QA list free-text commands as templates; a filled-in one is not 'inadmissible'."""
    from opid_rllib.prompts.admissible import is_inadmissible, matches_template

    assert matches_template("search[red running shoes]", ["search[<your query>]", "click[back to search]"])
    assert matches_template("<search>founder of acme</search>", ["<search>...</search>", "<answer>...</answer>"])
    assert not matches_template("click[b0123]", ["search[<your query>]", "click[back to search]"])
    assert not matches_template("go to desk 1", ["go to desk 2", "look"])
    adm = ["go to desk 2", "take potato 1 from microwave 1", "look"]
    assert is_inadmissible("take potato from microwave 1", adm)  # ALFWorld without the instance number
    assert not is_inadmissible("Take  Potato 1 from microwave 1", adm)  # compared normalized
    assert not is_inadmissible("search[red shoes]", ["search[<your query>]"])
    assert not is_inadmissible("go to mars 1", []) and not is_inadmissible("", adm)  # nothing to judge by


def test_on_plan_step_skills_name_the_move_taken_and_share_the_budget(failure_traj):
    """on_plan_step_skills gives the step term a "do this" side: steps where the agent took the expert's move
    get a skill naming that move (the oracle's on-plan wording), within max_step_skills; deviations fill the rest."""
    from opid_rllib.analyzer.oracle import oracle_step_skill

    s = HindsightAnalyzer(max_step_skills=3, on_plan_step_skills=2).analyze(failure_traj)
    assert s.step_skills == {
        0: "At this point, go to countertop 1.",
        1: "At this point, take mug 1 from countertop 1 instead of 'go to cabinet 1'.",
        2: "At this point, go to countertop 1.",
    }
    assert s.step_skills[0] == oracle_step_skill("alfworld", failure_traj.steps[0])
    # only the two on-plan steps are kept however many slots are offered; a malformed reply keeps its format rule
    many = HindsightAnalyzer(max_step_skills=7, on_plan_step_skills=7).analyze(failure_traj).step_skills
    assert [i for i, t in many.items() if t == "At this point, go to countertop 1."] == [0, 2]
    assert many[4].startswith("Reply with")
    assert HindsightAnalyzer(max_step_skills=1, on_plan_step_skills=5).analyze(failure_traj).step_skills == {
        0: "At this point, go to countertop 1."}
    # default: deviations only (the paper's reading), so no step skill repeats the move taken
    assert 0 not in HindsightAnalyzer(max_step_skills=3).analyze(failure_traj).step_skills


def test_on_plan_step_skills_name_object_moves_first_and_never_an_inspection(success_traj):
    s = HindsightAnalyzer(max_step_skills=5, on_plan_step_skills=2).analyze(success_traj)
    kept = {i: t for i, t in s.step_skills.items() if "instead of" not in t}
    assert kept == {5: "At this point, take mug 1 from countertop 1.", 7: "At this point, cool mug 1 with fridge 1."}
    rows = [("look", "You are in the middle of a room.", "look", True),
            ("go to countertop 1", "On the countertop 1, you see a mug 1.", "go to countertop 1", True)]
    assert HindsightAnalyzer(on_plan_step_skills=2).analyze(make_traj(rows, success=False)).step_skills == {
        1: "At this point, go to countertop 1."}


def test_on_plan_step_skills_bad_value_names_the_field():
    import pytest

    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="on_plan_step_skills"):
            make_analyzer("hindsight", on_plan_step_skills=bad)


def test_quote_sampled_false_corrects_without_quoting_the_sampled_command(failure_traj):
    """quote_sampled=False: the step term scores the sampled command under a skill that does not show it (a quoted
    command raises its own tokens in the teacher: studies/skill_copy_probe.py); the advice is otherwise the same."""
    quoted = HindsightAnalyzer(max_step_skills=7).analyze(failure_traj).step_skills
    bare = HindsightAnalyzer(max_step_skills=7, quote_sampled=False).analyze(failure_traj).step_skills
    assert quoted[1] == "At this point, take mug 1 from countertop 1 instead of 'go to cabinet 1'."
    assert bare[1] == "At this point, take mug 1 from countertop 1."
    assert sorted(bare) == sorted(quoted) and bare[4] == quoted[4]            # same steps; the format rule as is
    sampled = {s.action for s in failure_traj.steps}
    assert not [t for t in bare.values() for a in sampled if f"'{a}'" in t]
    rows = [(a, o, None, v) for a, o, _, v in FAILURE_ROWS]                    # no expert: loops and admissibility
    traj = make_traj(rows, success=False, env_name="searchqa")
    bare = HindsightAnalyzer(quote_sampled=False).analyze(traj).step_skills
    assert bare[2].startswith("Stop repeating the last command;")
    assert bare[5] == "Issue a command from the admissible list such as 'go to shelf 1'."
    assert not [t for t in bare.values() for a in sampled if f"'{a}'" in t]
    with pytest.raises(ValueError, match="quote_sampled='no': must be true or false"):
        HindsightAnalyzer(quote_sampled="no")
    assert make_analyzer("hindsight", quote_sampled=False).quote_sampled is False  # analyzer_config's route


def test_quote_sampled_false_keeps_sampled_commands_out_of_the_episode_skill(failure_traj, success_traj):
    """The episode skill's teacher copies the commands it warns about (a quoted command gained a median +4.1 nats
    over SmolLM2's warm start: studies/skill_copy_probe.py --skill episode); unquoted, the same rules name none."""
    quoted = HindsightAnalyzer().analyze(failure_traj).episode_skill
    bare = HindsightAnalyzer(quote_sampled=False).analyze(failure_traj).episode_skill
    assert "'go to cabinet 1' instead of 'take mug 1 from countertop 1'" in quoted and "'fly to shelf 1'" in quoted
    assert bare.startswith("Goal: put a cool mug in shelf. Core mistake: leaving the good plan: at step 1 the agent "
                           "left the plan, whose next move was 'take mug 1 from countertop 1'.")
    assert "looping: a command was repeated without progress" in bare and "a command had no effect" in bare
    assert "commands outside the admissible list; use only listed commands." in bare
    assert "broken format in 1 of 7 replies" in bare
    assert "The expert's first moves: go to countertop 1, then take mug 1 from countertop 1." in bare
    plan = {e for s in failure_traj.steps for e in s.expert_actions}
    wrong = {s.action for s in failure_traj.steps} - plan
    assert wrong and [a for a in wrong if f"'{a}'" in quoted] and not [a for a in wrong if f"'{a}'" in bare]
    won = HindsightAnalyzer(quote_sampled=False).analyze(success_traj).episode_skill   # the workflow is kept
    assert won == HindsightAnalyzer().analyze(success_traj).episode_skill.replace(" (e.g. 'look')", "")
    assert "4 of 10 steps did not advance" in won


def test_a_step_skill_at_every_step_is_the_unquoted_oracle_teacher(failure_traj, success_traj):
    """studies/recipe.sh's EVERY_STEP_ARM (max_step_skills_per_traj=30, on_plan_step_skills=30, quote_sampled=false):
    every step of a trajectory with an expert plan gets a skill, and it is the sentence `opid-eval --skills oracle
    --analyzer-option quote_sampled=false` shows the teacher at that step, so training distils the teacher whose
    headroom that play measured (an on-plan inspection, 'look' where the expert looks too, would get none)."""
    from opid_rllib.analyzer.oracle import oracle_step_skill

    analyzer = make_analyzer("hindsight", max_step_skills=30, on_plan_step_skills=30, quote_sampled=False)
    for traj in (failure_traj, success_traj):
        skills = analyzer.analyze(traj).step_skills
        assert sorted(skills) == [s.index for s in traj.steps]
        for k, step in enumerate(traj.steps):
            assert skills[step.index] == oracle_step_skill("alfworld", step, traj.steps[:k], quote_sampled=False)
        sampled = {s.action for s in traj.steps}
        assert not [t for t in skills.values() for a in sampled if f"'{a}'" in t]
    # T's budget (5 slots, 3 on right moves, quoted) leaves steps of the won episode without a skill
    t_skills = make_analyzer("hindsight", max_step_skills=5, on_plan_step_skills=3).analyze(success_traj).step_skills
    assert len(t_skills) < len(success_traj.steps)
