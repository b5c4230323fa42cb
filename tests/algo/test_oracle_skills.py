"""Skill-headroom evaluation: the policy plays with the oracle step skill at every step."""

import re

import pytest

from opid_rllib.analyzer.base import StepRecord, TrajectoryRecord
from opid_rllib.analyzer.hindsight import HindsightAnalyzer
from opid_rllib.analyzer.oracle import oracle_step_skill
from opid_rllib.env_runner import GroupedTextEnvRunner
from opid_rllib.prompts.skills import STEP_TITLE
from tests.algo.helpers import tiny_config

ADM = ["go to fridge 1", "go to countertop 2", "open fridge 1", "look"]


def _step(i, action, expert, valid=True, obs="You are in the middle of a room."):
    return StepRecord(index=i, observation=obs, response=f"<think>x</think><action>{action}</action>", action=action,
                      action_valid=valid, admissible_actions=ADM, expert_actions=expert)


def test_off_plan_wording_is_the_hindsight_analyzers_own():
    """The sentence equals what HindsightAnalyzer writes for the same step of a finished trajectory."""
    prev = [_step(0, "look", ["go to fridge 1", "open fridge 1"])]
    step = _step(1, "go to countertop 2", ["go to fridge 1", "open fridge 1"])
    online = oracle_step_skill("alfworld", step, prev)
    traj = TrajectoryRecord(traj_id="t", group_id="g", task_id="x", task="put a cool apple in fridge",
                            task_type="pick_cool_then_place_in_recep", env_name="alfworld", success=False,
                            steps=[*prev, step, _step(2, "look", ["go to fridge 1"])])
    written = HindsightAnalyzer(max_step_skills=5).analyze(traj).step_skills
    assert online == written[1] == "At this point, go to fridge 1 instead of 'go to countertop 2'."
    bad = _step(1, "", ["go to fridge 1"], valid=False)
    want = "Reply with <think>...</think> then <action>go to fridge 1</action>."
    assert oracle_step_skill("alfworld", bad, prev) == want


def test_on_plan_gets_the_plain_sentence_and_no_plan_gets_none():
    on_plan = _step(0, "Go to fridge 1", ["go to fridge 1"])
    assert oracle_step_skill("alfworld", on_plan) == "At this point, go to fridge 1."
    assert oracle_step_skill("alfworld", _step(0, "look", [])) is None


@pytest.fixture(scope="module")
def runner():
    cfg = tiny_config("alfworld", max_steps=3, group_size=1, analyzer="none")
    r = GroupedTextEnvRunner(config=cfg)
    yield r
    r.stop()


def _play(runner, seed, skills):
    tasks = list(runner._make_env(0).task_ids()[:2])
    return runner.sample_groups(tasks, explore=False, analyze=False, group_size=1, temperature=1.0, seed=seed,
                                skills=skills)


def test_oracle_play_injects_the_expert_step_skill_at_every_step_and_is_deterministic(runner):
    a = _play(runner, 11, "oracle")
    b = _play(runner, 11, "oracle")
    assert [e.get_actions() for e in a] == [e.get_actions() for e in b]
    steps = 0
    for ep in a:
        prompts, infos = ep.get_extra_model_outputs("prompt"), ep.get_infos()
        for i in range(len(ep)):
            expert = infos[i]["expert_actions"][0]
            section = str(prompts[i]).split(STEP_TITLE, 1)
            assert len(section) == 2, f"step {i} was played without a step skill"
            skill = re.search(r"\[(.*?)\]", section[1]).group(1)
            assert skill.startswith("At this point, ") or skill.startswith("Reply with")
            assert expert in skill
            steps += 1
    assert steps >= 2
    plain = _play(runner, 11, "none")
    assert all(STEP_TITLE not in str(p) for ep in plain for p in ep.get_extra_model_outputs("prompt"))


def test_unquoted_oracle_names_the_expert_without_the_sampled_command(runner):
    """analyzer_config quote_sampled=False (opid-eval --analyzer-option quote_sampled=false): the teacher's prompt
    for a well-formed off-plan response says "At this point, X." as the analyzer then writes, not "X instead of
    'Y'."; the runner's own oracle pass builds it (a hand-written response: the untrained tiny model writes none)."""
    from types import SimpleNamespace

    def skill_for(r):
        slot = {"info": {"admissible_actions": ADM, "expert_actions": ["go to fridge 1", "open fridge 1"]},
                "obs": "You are in the middle of a room.", "records": []}
        gen = SimpleNamespace(text="<think>x</think><action>go to countertop 2</action>")
        counts = {"oracle_skill_steps": 0, "prompt_truncations": 0}
        prompts, gens, _ = r._oracle_pass([slot], ["PROMPT"], [gen], [False], 1.0, 0, counts)
        assert counts["oracle_skill_steps"] == 1 and len(gens) == 1
        return re.search(r"\[(.*?)\]", prompts[0].split(STEP_TITLE, 1)[1]).group(1)

    assert skill_for(runner) == "At this point, go to fridge 1 instead of 'go to countertop 2'."
    cfg = tiny_config("alfworld", max_steps=3, group_size=1, analyzer="none",
                      analyzer_config={"quote_sampled": False})
    plain = GroupedTextEnvRunner(config=cfg)
    try:
        assert skill_for(plain) == "At this point, go to fridge 1."
    finally:
        plain.stop()


def test_oracle_needs_an_expert_plan(runner):
    slot = {"info": {"admissible_actions": ["look"]}, "obs": "o", "records": []}
    gen = runner.module.generate(runner.module.encode_prompts(["hello"])[0], temperature=1.0, seed=0)
    with pytest.raises(ValueError, match="expert plan"):
        runner._oracle_pass([slot], ["hello"], gen, [False], 1.0, 0, {"oracle_skill_steps": 0,
                                                                      "prompt_truncations": 0})
    with pytest.raises(ValueError, match="'none' or 'oracle'"):
        runner.sample_groups(["x"], skills="teacher")


def test_headroom_table_by_hand():
    from opid_rllib.eval.headroom import format_headroom, headroom

    student = {"columns": ["Pick", "Look", "Avg", "All"], "success_pct": {"Pick": 10.0, "Look": None, "Avg": 10.0,
                                                                           "All": 5.0},
               "n": {"Pick": 10, "Look": 0, "Avg": 1, "All": 10}, "format_valid_pct": 99.0, "mean_episode_length": 9.5}
    teacher = dict(student, success_pct={"Pick": 45.0, "Look": None, "Avg": 45.0, "All": 40.0})
    assert headroom(student, teacher) == {"Pick": 35.0, "Look": None, "Avg": 35.0, "All": 35.0}
    text = format_headroom(student, teacher)
    assert "skill headroom (points)" in text and "+35.0" in text and "8.00x" in text
