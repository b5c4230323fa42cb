"""Signpost (rung 0 of the learning gate): the env contract, its rooms and doors, and bad settings."""

import pytest

import envs
from envs.base import REQUIRED_INFO_KEYS
from envs.signpost.env import COLOURS, WIN_REWARD
from opid_rllib.prompts import build_prompt, insert_skills


def _play(env, task_id, picks):
    obs, info = env.reset(options={"task_id": task_id})
    out = [(obs, 0.0, False, info)]
    for pick in picks:
        obs, r, term, trunc, info = env.step(pick(info))
        out.append((obs, r, term or trunc, info))
        if term or trunc:
            break
    return out


def test_following_the_sign_wins_every_task_in_n_rooms_steps():
    env = envs.make("signpost", n_rooms=3)
    assert env.max_steps == 4  # n_rooms + one spare try
    for tid in env.task_ids()[:20]:
        steps = _play(env, tid, [lambda i: i["expert_actions"][0]] * 3)
        assert all(k in steps[0][3] for k in REQUIRED_INFO_KEYS)
        assert [s[1] for s in steps[1:]] == [0.0, 0.0, WIN_REWARD] and steps[-1][3]["won"]
        assert steps[0][0].startswith("Room 1 of 3. Sign: ") and len(steps[0][3]["expert_actions"]) == 3


def test_a_wrong_door_is_locked_and_the_agent_stays():
    env = envs.make("signpost")
    obs, info = env.reset(options={"task_id": "signpost-train-7"})
    right = info["expert_actions"][0]
    wrong = next(a for a in info["admissible_actions"] if a != right)
    obs2, r, term, trunc, info2 = env.step(wrong)
    assert obs2.startswith(f"The {wrong.split()[1]} door is locked. Room 1 of 2.") and r == 0 and not term
    assert info2["action_valid"] and info2["expert_actions"][0] == right
    obs3, *_ , info3 = env.step("dance")
    assert obs3 == "Nothing happens." and not info3["action_valid"]
    _, r, term, trunc, info4 = env.step(right)  # third step: the cap, still in room 2
    assert trunc and not term and not info4["won"] and r == 0


def test_layouts_are_seeded_per_task_and_splits_are_disjoint():
    a, b = envs.make("signpost"), envs.make("signpost")
    for tid in ("signpost-train-0", "signpost-train-999"):
        assert a.reset(options={"task_id": tid}) == b.reset(options={"task_id": tid})
    firsts = {envs.make("signpost").reset(options={"task_id": f"signpost-train-{i}"})[0] for i in range(40)}
    assert len(firsts) > 3  # the sign's door varies
    valid = envs.make("signpost", split="valid")
    assert not set(valid.task_ids()) & set(a.task_ids())
    for bad in ("signpost-dev-0", "signpost-train-1000", "room-1"):
        with pytest.raises(ValueError, match=f"task_id='{bad}'"):
            a.reset(options={"task_id": bad})


def test_without_signs_every_door_opens_and_the_observation_names_no_door():
    env = envs.make("signpost", signs=False)
    for tid in env.task_ids()[:10]:
        obs, info = env.reset(options={"task_id": tid})
        assert "Sign" not in obs and not any(c in obs for c in COLOURS)
        steps = _play(env, tid, [lambda i: i["admissible_actions"][-1]] * 2)
        assert steps[-1][3]["won"]


def test_fixed_sign_and_graffiti():
    env = envs.make("signpost", fixed_sign="red", n_marks=2)
    for tid in env.task_ids()[:10]:
        obs, info = env.reset(options={"task_id": tid})
        assert "Sign: red." in obs and info["expert_actions"] == ["open red door"] * 2
        graffiti = obs.split("Graffiti: ")[1].rstrip(".").split(", ")
        assert len(graffiti) == 2 and "red" not in graffiti


@pytest.mark.parametrize("kwargs, match", [
    ({"n_doors": 9}, "n_doors=9"), ({"n_rooms": 0}, "n_rooms=0"), ({"n_marks": 4}, "n_marks=4"),
    ({"fixed_sign": "mauve"}, "fixed_sign='mauve'"), ({"signs": "no"}, "signs='no'"), ({"split": "dev"}, "split='dev'"),
    ({"sign": True}, "unknown setting"),
])
def test_bad_settings_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        envs.make("signpost", **kwargs)


def test_prompt_has_both_skill_slots_and_no_door_list():
    env = envs.make("signpost")
    obs, info = env.reset(options={"task_id": "signpost-train-3"})
    p = build_prompt("signpost", task=info["task"], obs=obs, admissible=info["admissible_actions"], history_length=2)
    assert p.splitlines()[0] == "Your task is to: open the doors the signs name."
    assert "open blue door" not in p and obs in p
    s = insert_skills(p, episode_skill="EP", step_skill="ST")
    assert s.index("[EP]") < s.index(obs) < s.index("[ST]") < s.index("Now it's your turn")


HOUSES = dict(signs="hidden", houses=True, wrong_door_leads_on=True, n_rooms=3)


def test_hidden_houses_name_the_house_show_no_door_and_lock_nothing_in_place():
    """The OPID learning test's setting (tuned_examples/signpost_skills.py): the house is named, no colour is shown,
    a wrong door leads on and loses, so every episode has one step per room."""
    env = envs.make("signpost", **HOUSES)
    for tid in env.task_ids()[:10]:
        obs, info = env.reset(options={"task_id": tid})
        assert obs == f"House {tid.rsplit('-', 1)[1]}. Room 1 of 3." and not any(c in obs for c in COLOURS)
        plan = list(info["expert_actions"])
        assert len(plan) == 3 and info["task"] == "open the door of your house in every room"
        won = _play(env, tid, [lambda i: i["expert_actions"][0]] * 3)
        assert won[-1][3]["won"] and won[-1][1] == 10.0
        wrong = [a for a in info["admissible_actions"] if a != plan[0]][0]
        steps = _play(env, tid, [lambda i: wrong, lambda i: i["expert_actions"][0], lambda i: i["expert_actions"][0]])
        assert [s[2] for s in steps[1:]] == [False, False, True]  # terminated only after the third room
        assert "Room 2 of 3" in steps[1][0] and not steps[-1][3]["won"] and steps[-1][1] == 0.0
        # after a wrong door the plan names the next rooms' doors, as for a right one
        assert steps[1][3]["expert_actions"] == plan[1:]


def test_same_door_opens_every_room_of_a_house_and_houses_differ():
    env = envs.make("signpost", **HOUSES, same_door=True)
    doors = set()
    for tid in env.task_ids()[:12]:
        _, info = env.reset(options={"task_id": tid})
        assert len(set(info["expert_actions"])) == 1
        doors.add(info["expert_actions"][0])
    assert len(doors) > 1


@pytest.mark.parametrize("kwargs, match", [
    ({"houses": "yes"}, "houses='yes'"), ({"same_door": 1}, "same_door=1"), ({"signs": 1}, "signs=1"),
    ({"wrong_door_leads_on": True, "signs": False}, "needs locked doors"),
    ({"same_door": True, "fixed_sign": "red"}, "leave fixed_sign unset"),
])
def test_house_settings_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        envs.make("signpost", **kwargs)
