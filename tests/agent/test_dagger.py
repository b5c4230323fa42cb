"""Policy-state (DAgger) demonstrations: the policy plays through the real runner, the env's expert labels
every distinct state it reached (opid_rllib/sft/dagger.py, `opid-sft --policy-tasks`)."""

from __future__ import annotations

import json
import re

import pytest
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

import envs
from opid_rllib.prompts import project_action
from opid_rllib.sft.dagger import play_policy, policy_state_demos


def _alfworld_ready() -> bool:
    try:
        return len(envs.make("alfworld").task_ids()) > 0
    except Exception:
        return False


ADMISSIBLE = ["go to fridge 1", "go to desk 1", "look"]


def _episode(steps, task="put a mug in the fridge."):
    """A real RLlib episode as the runner writes it: infos[i] and observations[i] are the state of step i."""
    ep = SingleAgentEpisode()
    ep.add_env_reset(observation=steps[0][0], infos={"expert_actions": steps[0][1], "admissible_actions": ADMISSIBLE})
    ep.custom_data["opid"] = {"task_id": "t0", "task": task, "won": False}
    for i, (_, _, action) in enumerate(steps):
        nxt = steps[i + 1] if i + 1 < len(steps) else ("end", ["look"], None)
        ep.add_env_step(observation=nxt[0], action=action, reward=0.0,
                        infos={"expert_actions": nxt[1], "admissible_actions": ADMISSIBLE},
                        extra_model_outputs={"prompt": f"prompt {i}"})
    return ep


def test_loops_give_one_sample_and_states_without_a_plan_none():
    # (observation of the state, the expert's plan there, the command the policy took)
    steps = [("You are in the middle of a room.", ["go to fridge 1"], "go to desk 1"),
             ("On the desk 1, you see a pen 1.", ["go to fridge 1"], "look"),
             ("On the desk 1, you see a pen 1.", ["go to fridge 1"], "look"),   # new: reached by 'look'
             ("On the desk 1, you see a pen 1.", ["go to fridge 1"], "look"),   # loop: same obs after 'look' 
             ("On the desk 1, you see a pen 1.", [], "go to fridge 1"),         # the expert gave up here
             ("The fridge 1 is closed.", ["open fridge 1"], "open fridge 1")]
    stats: dict = {}
    demos = policy_state_demos("alfworld", [_episode(steps)], response_style="action", stats=stats)
    assert [(d.step, d.prompt, d.action) for d in demos] == [
        (0, "prompt 0", "go to fridge 1"), (1, "prompt 1", "go to fridge 1"), (2, "prompt 2", "go to fridge 1"),
        (5, "prompt 5", "open fridge 1")]
    assert all(d.prompt == d.base_prompt and d.step_skill is None and not d.hint_follow for d in demos)
    assert all(d.response == f"<think></think>\n<action>{d.action}</action>" for d in demos)
    assert stats == {"policy_episodes": 1, "policy_won": 0, "policy_steps": 6, "labelled_states": 4,
                     "policy_agreed": 1, "no_expert_plan": 1, "repeated_states": 1, "hint_follow_demos": 0,
                     "demos": 4}
    with pytest.raises(ValueError, match="hint_follow_prob"):
        policy_state_demos("alfworld", [], hint_follow_prob=2.0)


def test_hint_samples_at_policy_states_target_the_command_their_skill_names():
    steps = [(f"state {i}", ["go to fridge 1"], "look") for i in range(8)]
    stats: dict = {}
    demos = policy_state_demos("alfworld", [_episode(steps)], response_style="action", hint_follow_prob=1.0,
                               seed=0, stats=stats)
    hints = [d for d in demos if d.hint_follow]
    assert len(hints) == 8 == stats["hint_follow_demos"] and len(demos) == 16
    for d in hints:
        named, instead = re.fullmatch(r"At this point, (.+) instead of '(.+)'\.", d.step_skill).groups()
        assert named == d.action != "go to fridge 1" and instead == "go to fridge 1"
        assert d.base_prompt == f"prompt {d.step}" and d.step_skill in d.prompt and d.prompt != d.base_prompt
    again = policy_state_demos("alfworld", [_episode(steps)], response_style="action", hint_follow_prob=1.0, seed=0)
    assert [d.to_dict() for d in again] == [d.to_dict() for d in demos]  # seeded


@pytest.mark.skipif(not _alfworld_ready(), reason="alfworld env lists no tasks")
def test_policy_plays_through_the_runner_and_the_expert_labels_its_states(one_thread):
    """The tiny model plays two real ALFWorld games through GroupedTextEnvRunner; every sample's prompt is the
    one the policy saw and its target the expert's plan at that state, checked by replaying the games."""
    ids = envs.make("alfworld", split="train").task_ids()[:2]
    eps = play_policy("tiny", "alfworld", ids, split="train", history_length=2, max_steps=4, max_new_tokens=8,
                      temperature=1.0, seed=0)
    assert [e.custom_data["opid"]["task_id"] for e in eps] == list(ids) and all(len(e) == 4 for e in eps)
    stats: dict = {}
    demos = policy_state_demos("alfworld", eps, response_style="action", stats=stats)
    assert stats["policy_steps"] == 8 and stats["labelled_states"] == len(demos) >= 2
    env = envs.make("alfworld", split="train", max_steps=4)
    for ep in eps:
        tid = ep.custom_data["opid"]["task_id"]
        obs, info = env.reset(options={"task_id": tid})
        mine = {d.step: d for d in demos if d.task_id == tid}
        for i, action in enumerate(ep.get_actions()):
            if i in mine:
                assert mine[i].prompt == ep.get_extra_model_outputs("prompt")[i]
                assert mine[i].action == info["expert_actions"][0]
                assert project_action("alfworld", mine[i].response) == (mine[i].action, True)
            obs, _, term, trunc, info = env.step(action)


def test_cli_trains_on_policy_states_alone(tmp_path, capsys):
    """`opid-sft --tasks 0 --policy-tasks N`: the model's own games are the whole data set; the stats say so
    (here in bf16: the games with bf16 weights, training under autocast)."""
    import torch

    from opid_rllib.cli.sft import main

    before = torch.get_num_threads()
    out = tmp_path / "m"
    try:
        assert main(["--env", "searchqa", "--model", "tiny", "--out", str(out), "--tasks", "0", "--policy-tasks", "2",
                     "--max-steps", "2", "--policy-max-new-tokens", "8", "--epochs", "1", "--max-prompt-len", "64",
                     "--torch-threads", "1", "--dtype", "bfloat16"]) == 0
    finally:
        torch.set_num_threads(before)
    stats = json.loads((out / "sft_stats.json").read_text())
    ps = stats["policy_states"]
    assert ps["policy_episodes"] == 2 and ps["labelled_states"] >= 2 and stats["demos"] == ps["demos"]
    assert stats["collection"] == {} and stats["policy_tasks"] == 2 and stats["dtype"] == "bfloat16"
    assert stats["machine"]["torch_threads"] == 1 and stats["machine"]["torch"] == torch.__version__  # who built it
    assert "distinct states labelled by the expert" in capsys.readouterr().out
    assert main(["--env", "searchqa", "--out", str(tmp_path / "x"), "--tasks", "0"]) == 2
    assert "--policy-tasks" in capsys.readouterr().err
    assert main(["--env", "searchqa", "--out", str(tmp_path / "x"), "--policy-tasks", "1",
                 "--policy-temperature", "-1"]) == 2
    assert "--policy-temperature=-1" in capsys.readouterr().err

