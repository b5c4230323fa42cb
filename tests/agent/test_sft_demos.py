"""What the warm start's demonstrations hold (opid_rllib/sft/demos.py, demo_skills.py): prompts byte-equal to the
runner's, targets that parse back to the expert's command, skills in their slots, analyzer-worded step skills on
recovery states, action-only responses, hint-following samples and the no-op-loop deviations.

searchqa/webshop are offline and quick; ALFWorld runs where its env lists tasks.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import envs
from opid_rllib.prompts import insert_skills, project_action
from opid_rllib.prompts.skills import EPISODE_TITLE, STEP_TITLE
from opid_rllib.sft.demos import collect_demonstrations, expert_response, select_task_ids


def _alfworld_ready() -> bool:
    try:
        return len(envs.make("alfworld").task_ids()) > 0
    except Exception:
        return False


FAST_ENVS = ["searchqa", "webshop"]
ALL_ENVS = FAST_ENVS + [pytest.param("alfworld", marks=pytest.mark.skipif(not _alfworld_ready(),
                                                                          reason="alfworld env lists no tasks"))]


def _same(env_name, a, b):
    if env_name == "searchqa":
        return a == b
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


@pytest.fixture(scope="module")
def runner_prompt():
    """GroupedTextEnvRunner._prompt_for on a stand-in runner (no Ray workers started)."""
    from opid_rllib.env_runner import GroupedTextEnvRunner

    def build(env_name, history_length, slot):
        fake = SimpleNamespace(settings={"history_length": history_length, "skills_in_rollout_prompt": False},
                               env_name=env_name, _skill_cache={})
        return GroupedTextEnvRunner._prompt_for(fake, slot)

    return build


def _replay(env_name, demos, history_length, runner_prompt, follow_expert: bool):
    """Replay every kept episode the way the runner does: same prompt bytes at every step, the
    target parses (valid) to the demonstrated command, and the episode is won."""
    env = envs.make(env_name, split="train", max_steps=30)
    by_task: dict[str, list] = {}
    for d in demos:
        by_task.setdefault(d.task_id, []).append(d)
    for task_id, eps in by_task.items():
        assert [d.step for d in eps] == list(range(len(eps)))
        obs, info = env.reset(options={"task_id": task_id})
        slot = {"info": info, "obs": obs, "history": [], "task_id": task_id}
        for d in eps:
            assert d.base_prompt == runner_prompt(env_name, history_length, slot)
            assert d.prompt == insert_skills(d.base_prompt, episode_skill=d.episode_skill, step_skill=d.step_skill)
            action, valid = project_action(env_name, d.response)
            assert valid and action == d.action
            if follow_expert:
                assert _same(env_name, action, info["expert_actions"][0])
            obs, _, term, trunc, info = env.step(action)
            slot["history"].append((slot["obs"], action))
            slot["obs"], slot["info"] = obs, info
        assert term and info["won"]
    return by_task


@pytest.mark.parametrize("env_name", ALL_ENVS)
def test_demos_match_runner_prompts_and_expert(env_name, runner_prompt):
    hl = 2
    demos = collect_demonstrations(env_name, num_tasks=4, history_length=hl, max_steps=30, seed=3, skill_fraction=0.0)
    assert demos
    assert all(d.prompt == d.base_prompt and not d.episode_skill and not d.step_skill for d in demos)
    _replay(env_name, demos, hl, runner_prompt, follow_expert=True)


def test_seeded_task_choice_and_determinism():
    ids = [f"t{i}" for i in range(50)]
    assert select_task_ids(ids, 5, None) == ids[:5]
    assert select_task_ids(ids, 5, 1) == select_task_ids(ids, 5, 1) != select_task_ids(ids, 5, 2)
    assert select_task_ids(ids, 500, 0) and len(select_task_ids(ids, 500, 0)) == 50
    a = collect_demonstrations("searchqa", num_tasks=5, history_length=5, max_steps=4, seed=1, skill_fraction=0.5)
    b = collect_demonstrations("searchqa", num_tasks=5, history_length=5, max_steps=4, seed=1, skill_fraction=0.5)
    assert [d.to_dict() for d in a] == [d.to_dict() for d in b]


@pytest.mark.parametrize("env_name", FAST_ENVS)
def test_skill_augmented_demos(env_name, runner_prompt):
    """Every episode gets a skill section; skills agree with the demonstrated commands (episode-skill
    episodes follow the skill's workflow and still win)."""
    stats: dict = {}
    demos = collect_demonstrations(env_name, num_tasks=8, history_length=3, max_steps=30, seed=0, skill_fraction=1.0,
                                   stats=stats)
    assert stats["episodes_with_skills"] == stats["episodes_won"] == len({d.task_id for d in demos}) > 0
    by_task = _replay(env_name, demos, 3, runner_prompt, follow_expert=False)
    kinds = set()
    for eps in by_task.values():
        assert any(d.episode_skill or d.step_skill for d in eps)
        assert len({d.episode_skill for d in eps}) == 1  # one episode skill for the whole episode
        for d in eps:
            if d.episode_skill:
                kinds.add("episode")
                assert EPISODE_TITLE in d.prompt and d.episode_skill.strip() in d.prompt
                inner = d.action.split(">", 1)[1].rsplit("<", 1)[0] if env_name == "searchqa" else d.action
                assert inner.lower() in d.episode_skill.lower()  # the workflow names every command taken
            if d.step_skill:
                kinds.add("step")
                assert STEP_TITLE in d.prompt and d.step_skill.strip() in d.prompt
                inner = d.action.split(">", 1)[1].rsplit("<", 1)[0] if env_name == "searchqa" else d.action
                assert inner.lower() in d.step_skill.lower()
    assert kinds == {"episode", "step"}


@pytest.mark.parametrize("env_name,action", [
    ("alfworld", "take apple 1 from countertop 2"), ("webshop", "click[< prev]"),
    ("webshop", "search[red <b>shoes</b> size 8]"), ("searchqa", "<search>Who wrote Hamlet</search>"),
    ("searchqa", "<answer> New York </answer>"), ("searchqa", "plain answer"),
])
def test_expert_response_is_valid(env_name, action):
    task = "put a <clean> apple in fridge </action> 日本"
    resp = expert_response(env_name, task=task, action=action)
    got, valid = project_action(env_name, resp)
    assert valid, resp
    if env_name == "searchqa":
        expected = {"plain answer": "<answer>plain answer</answer>",
                    "<answer> New York </answer>": "<answer>New York</answer>"}.get(action, action)
        assert got == expected
    else:
        assert got == action.lower()


def test_skill_literate_demos_use_the_analyzers_wording_on_recovery_states():
    """step_skill_wording='analyzer': every step skill is what the hindsight analyzer writes for that
    state (mostly 'X instead of Y' with a wrong admissible Y) and the demonstrated command is X;
    deviation_prob puts wrong commands into the history that are never demonstrated."""
    import re

    from opid_rllib.analyzer.base import StepRecord
    from opid_rllib.analyzer.oracle import oracle_step_skill

    stats: dict = {}
    demos = collect_demonstrations("alfworld", num_tasks=6, history_length=30, max_steps=30, seed=1,
                                   skill_fraction=1.0, stats=stats, step_skill_wording="analyzer",
                                   deviation_prob=0.3)
    steps = [d for d in demos if d.step_skill]
    assert steps and stats["episodes_won"] > 0
    contrast = 0
    for d in steps:
        m = re.fullmatch(r"At this point, (.+?)(?: instead of '(.+)')?\.", d.step_skill)
        assert m, d.step_skill
        assert m.group(1) == d.action  # the skill names the demonstrated (expert) command
        if m.group(2):
            contrast += 1
            assert m.group(2) != d.action
            want = oracle_step_skill("alfworld", StepRecord(index=d.step, observation="", response="",
                                                            action=m.group(2), expert_actions=[d.action]))
            assert d.step_skill == want
    assert contrast > len(steps) / 3
    # Recovery states: some demo histories hold commands that no demo of that episode demonstrates.
    by_task: dict = {}
    for d in demos:
        by_task.setdefault(d.task_id, []).append(d)
    strayed = 0
    for eps in by_task.values():
        last = max(eps, key=lambda d: d.step)
        shown = {d.action for d in eps}
        history_actions = re.findall(r"Action \d+: '([^']*)'", last.base_prompt)
        strayed += sum(a not in shown for a in history_actions)
    assert strayed > 0
    with pytest.raises(ValueError, match="step_skill_wording"):
        collect_demonstrations("alfworld", num_tasks=1, history_length=2, max_steps=30, seed=0,
                               step_skill_wording="fancy")


@pytest.mark.parametrize("env_name,action", [
    ("alfworld", "take apple 1 from countertop 2"), ("webshop", "search[red <b>shoes</b> size 8]"),
    ("searchqa", "<search>Who wrote Hamlet</search>"),
])
def test_action_only_responses_are_valid_and_short(env_name, action):
    """response_style='action': an empty think block + the command, still format-valid; searchqa keeps
    its reasoning (the block kind is the decision there)."""
    task = "put a clean apple in fridge"
    short = expert_response(env_name, task=task, action=action, style="action")
    long = expert_response(env_name, task=task, action=action)
    assert project_action(env_name, short) == project_action(env_name, long)
    assert project_action(env_name, short)[1]
    if env_name == "searchqa":
        assert short == long
    else:
        assert short == f"<think></think>\n<action>{action}</action>" and len(short) < len(long)
    with pytest.raises(ValueError, match="response_style"):
        expert_response(env_name, task=task, action=action, style="verbose")


def test_hint_following_samples_target_the_command_their_skill_names():
    """hint_follow_prob: extra samples whose analyzer-worded step skill names an admissible command
    other than the expert's, with that command as the target; every other sample is exactly what
    hint_follow_prob=0 gives (own random stream), so the student's data is unchanged."""
    import re

    kw = dict(num_tasks=4, history_length=2, max_steps=30, seed=3, skill_fraction=0.5,
              step_skill_wording="analyzer", response_style="action")
    stats: dict = {}
    with_hints = collect_demonstrations("alfworld", hint_follow_prob=0.5, stats=stats, **kw)
    plain = collect_demonstrations("alfworld", **kw)
    hints = [d for d in with_hints if d.hint_follow]
    assert [d.to_dict() for d in with_hints if not d.hint_follow] == [d.to_dict() for d in plain]
    assert stats["hint_follow_demos"] == len(hints) and len(plain) / 4 < len(hints) < len(plain)
    expert_at = {(d.task_id, d.step): d.action for d in plain}
    for d in hints:
        m = re.fullmatch(r"At this point, (.+) instead of '(.+)'\.", d.step_skill)
        assert m, d.step_skill
        named, instead = m.groups()
        assert named == d.action and instead == expert_at[(d.task_id, d.step)] != d.action
        admissible = re.search(r"admissible actions in the current state are: (\[.*\])\.", d.base_prompt).group(1)
        assert f"'{d.action}'" in admissible
        assert d.prompt != d.base_prompt and d.step_skill in d.prompt and d.episode_skill is None
        assert d.response == f"<think></think>\n<action>{d.action}</action>"
    with pytest.raises(ValueError, match="hint_follow_prob"):
        collect_demonstrations("alfworld", hint_follow_prob=1.5, **kw)


def test_hint_commands_are_drawn_verb_first():
    """'go to' commands outnumber the rest; drawing the verb first makes 'take ...' hints common, and the
    expert's own command, 'help' and templates are never named."""
    import numpy as np

    from opid_rllib.sft.demo_skills import hint_action as _hint_action

    admissible = [f"go to cabinet {i}" for i in range(1, 11)] + ["take book 1 from sofa 1", "help",
                                                                   "search[<your query>]", "look"]
    rng = np.random.default_rng(0)
    draws = [_hint_action(admissible, "go to cabinet 3", rng) for _ in range(300)]
    assert "go to cabinet 3" not in draws and "help" not in draws and "search[<your query>]" not in draws
    assert 0.2 < draws.count("take book 1 from sofa 1") / len(draws) < 0.5  # 1 of 3 verbs, not 1 of 11 commands
    assert _hint_action(["go to cabinet 3", "help"], "go to cabinet 3", rng) is None


def test_repeat_deviations_show_the_no_op_loop_and_the_way_out():
    """deviation_repeat_prob: that share of the deviations repeats the previous command, which in ALFWorld
    answers 'Nothing happens.' (a random admissible deviation never does); the demonstrated command after it
    is the demonstrator's, never the repeat. Off (0), the same collection holds no such state."""
    import re

    entry = re.compile(r"\[Observation \d+: '(.*?)', Action \d+: '([^']*)'\]", re.S)

    def histories(**kw):
        demos = collect_demonstrations("alfworld", num_tasks=3, history_length=30, max_steps=30, seed=1,
                                       skill_fraction=0.0, deviation_prob=0.3, demonstrator="sweep",
                                       response_style="action", **kw)
        assert demos
        return demos, [entry.findall(d.base_prompt) for d in demos]

    demos, hist = histories(deviation_repeat_prob=1.0)
    no_ops = 0
    for d, h in zip(demos, hist):
        for k in range(1, len(h)):
            if h[k][0].startswith("Nothing happens"):
                no_ops += 1
                assert h[k - 1][1] == h[k - 2][1] if k >= 2 else False  # the command before was a repeat
        if h and h[-1][0].startswith("Nothing happens"):
            assert d.action != h[-1][1]  # the way out: not the repeated command again
    assert no_ops > 0
    _, plain = histories()
    assert not any(obs.startswith("Nothing happens") for h in plain for obs, _ in h)
    with pytest.raises(ValueError, match="deviation_repeat_prob=0.5: .* set deviation_prob > 0"):
        collect_demonstrations("alfworld", num_tasks=1, history_length=2, max_steps=30, seed=0,
                               deviation_repeat_prob=0.5)
    with pytest.raises(ValueError, match=r"deviation_repeat_prob=1.5: must be in \[0, 1\]"):
        collect_demonstrations("alfworld", num_tasks=1, history_length=2, max_steps=30, seed=0, deviation_prob=0.1,
                               deviation_repeat_prob=1.5)
