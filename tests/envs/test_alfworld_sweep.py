"""The sweep demonstrator (envs/alfworld/sweep.py): wins real games from what the prompt shows."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from envs.alfworld.env import ALFWorldEnv, NOTHING_HAPPENS  # noqa: E402
from envs.alfworld.sweep import SweepDemonstrator, play_sweep  # noqa: E402
from envs.panels import get_panel  # noqa: E402

ROOM = ["cabinet 1", "cabinet 2", "countertop 1", "drawer 1", "fridge 1", "microwave 1", "sinkbasin 1",
        "toaster 1"]


def _info(task_type="pick_heat_then_place_in_recep", obj="Apple", recep="CounterTop", here=None, extra=()):
    adm = [f"go to {r}" for r in ROOM if r != here] + ["inventory", "look", *extra]
    return {"task_type": task_type, "admissible_actions": adm,
            "ground_truth": {"object_target": obj, "parent_target": recep, "toggle_target": ""}}


def _arrive(d: SweepDemonstrator, place: str, what: str = "nothing") -> str:
    obs = f"You arrive at {place}. On the {place}, you see {what}."
    d.observe(f"go to {place}", obs)
    return obs


def test_wins_the_smoke_panel_without_the_expert_and_only_admissible_commands():
    """expert=False: the env gives no plan, so the wins come from the prompt's information alone."""
    panel = get_panel("alfworld/smoke@v1")
    env = ALFWorldEnv(split=panel.split, expert=False)
    won = 0
    for task_id in panel.task_ids:
        d = SweepDemonstrator()
        obs, info = env.reset(options={"task_id": task_id})
        assert info["expert_actions"] == []
        d.reset(obs, info)
        for _ in range(30):
            cmd = d.act(obs, info)
            assert cmd is not None and cmd in info["admissible_actions"], (task_id, cmd)
            obs, _, term, _, info = env.step(cmd)
            assert obs != NOTHING_HAPPENS
            d.observe(cmd, obs)
            if term:
                won += 1
                break
    assert won >= 9, won  # 11 of 12 when written; a broken route or search wins few
    assert play_sweep(env, panel.task_ids[0], 30)["won"]


def test_next_place_depends_on_the_current_place_only():
    """The search needs no memory: two different walks that arrive at the same place go on the same way,
    to the next receptacle (env order) of a class the priors allow for the object."""
    a, b = SweepDemonstrator(), SweepDemonstrator()
    for d in (a, b):
        d.reset("Welcome", _info())
    _arrive(a, "sinkbasin 1")
    for place in ("toaster 1", "drawer 1", "cabinet 2"):
        _arrive(b, place)
    obs_a, obs_b = _arrive(a, "countertop 1"), _arrive(b, "countertop 1")
    info = _info(here="countertop 1")
    assert a.act(obs_a, info) == b.act(obs_b, info)
    allowed = set(a._search_order("apple"))
    assert "toaster 1" not in allowed and "countertop 1" in allowed  # priors: apples are not in toasters
    nxt = a.act(obs_a, info)[len("go to "):]
    between = ROOM[ROOM.index("countertop 1") + 1:ROOM.index(nxt)]
    assert nxt in allowed and not allowed & set(between)
    nextdoor = _info(here="countertop 1")
    nextdoor["admissible_actions"].remove(f"go to {nxt}")  # next to here: no 'go to', so the search skips it
    assert a.act(obs_a, nextdoor) not in (f"go to {nxt}", None)


def test_route_after_the_take_opens_closed_places_and_puts_a_wrong_object_back():
    d = SweepDemonstrator()
    d.reset("Welcome", _info())
    obs = "You arrive at fridge 1. The fridge 1 is closed."
    d.observe("go to fridge 1", obs)
    assert d.act(obs, _info(here="fridge 1", extra=["open fridge 1"])) == "open fridge 1"
    obs = "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1."
    d.observe("open fridge 1", obs)
    take = _info(here="fridge 1", extra=["take apple 1 from fridge 1"])
    assert d.act(obs, take) == "take apple 1 from fridge 1"
    d.observe("take apple 1 from fridge 1", "You pick up the apple 1 from the fridge 1.")
    assert d.act("You pick up the apple 1 from the fridge 1.", _info(here="fridge 1")) == "go to microwave 1"
    obs = _arrive(d, "microwave 1")
    heat = _info(here="microwave 1", extra=["heat apple 1 with microwave 1"])
    assert d.act(obs, heat) == "heat apple 1 with microwave 1"
    d.observe("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1.")
    assert d.act("You heat the apple 1 using the microwave 1.", _info(here="microwave 1")) == "go to countertop 1"
    obs = _arrive(d, "countertop 1")
    put = _info(here="countertop 1", extra=["move apple 1 to countertop 1"])
    assert d.act(obs, put) == "move apple 1 to countertop 1"
    # a closed target is opened first; a target next to here (no 'go to' for it) is used from here
    d.target = "drawer"
    assert d.act(obs, _info(here="countertop 1", extra=["open drawer 1"])) == "open drawer 1"
    assert d.act(obs, _info(here="countertop 1")) == "go to drawer 1"
    nextdoor = _info(here="countertop 1", extra=["move apple 1 to drawer 1"])
    nextdoor["admissible_actions"].remove("go to drawer 1")
    assert d.act(obs, nextdoor) == "move apple 1 to drawer 1"
    # a recovery state: holding something else -> put it down where it is, then search on
    w = SweepDemonstrator()
    w.reset("Welcome", _info())
    obs = _arrive(w, "drawer 1", "a knife 1")
    w.observe("take knife 1 from drawer 1", "You pick up the knife 1 from the drawer 1.")
    back = _info(here="drawer 1", extra=["move knife 1 to drawer 1"])
    assert w.act("You pick up the knife 1 from the drawer 1.", back) == "move knife 1 to drawer 1"
    assert w.act("You pick up the knife 1 from the drawer 1.", _info(here="drawer 1")) is None  # not admissible


def test_env_expert_sweep_names_the_sweep_command_along_any_walk():
    """ALFWorldEnv(expert="sweep"): info["expert_actions"] is the sweep's command for the state the agent is
    in, whoever got it there (the oracle, the hindsight analyzer and the agreement metric then name it)."""
    panel = get_panel("alfworld/smoke@v1")
    env, bare = ALFWorldEnv(split=panel.split, expert="sweep"), ALFWorldEnv(split=panel.split, expert=False)
    for task_id in panel.task_ids[:4]:  # followed from the start: exactly play_sweep's game
        obs, info = env.reset(options={"task_id": task_id})
        walk = []
        while info["expert_actions"] and len(walk) < 30:
            walk.append(info["expert_actions"][0])
            obs, _, term, _, info = env.step(walk[-1])
            if term:
                break
        assert walk == play_sweep(bare, task_id, 30)["actions"], task_id
    # after a detour the command is the sweep's from there: an invalid command changes nothing, and
    # after 3 random commands following it still finishes the games
    obs, info = env.reset(options={"task_id": panel.task_ids[0]})
    first = info["expert_actions"]
    obs, _, _, _, info = env.step("dance wildly")
    assert obs == NOTHING_HAPPENS and info["expert_actions"] == first
    wins = 0
    rng = random.Random(0)
    for task_id in panel.task_ids:
        obs, info = env.reset(options={"task_id": task_id})
        for i in range(33):
            cmd = rng.choice(info["admissible_actions"]) if i < 3 else (info["expert_actions"] or [None])[0]
            if cmd is None:
                break
            assert cmd in info["admissible_actions"]
            obs, _, term, _, info = env.step(cmd)
            if term:
                wins += 1
                break
    assert wins >= 9, wins  # 12 of 12 when written: relabelled states are recoverable


def test_env_expert_names_are_checked():
    with pytest.raises(ValueError, match=r"expert='oracle': choose one of \('handcoded', 'sweep', 'none'\)"):
        ALFWorldEnv(split="train", expert="oracle")
    assert ALFWorldEnv(split="train", expert=True).expert == "handcoded"
    assert ALFWorldEnv(split="train", expert="none").use_expert is False
