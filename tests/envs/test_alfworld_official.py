"""ALFWorld on official-layout data (json_2.1.1) with bad files: every error names its file, a bad
trial is skipped with a warning and counted, an empty split says where it looked."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from envs.alfworld import generator as gen  # noqa: E402
from envs.alfworld.env import ALFWorldEnv  # noqa: E402
from envs.alfworld import official  # noqa: E402
from envs.alfworld.official import TrialError, read_json, trial_meta  # noqa: E402

SPEC = next(s for s in gen.load_specs() if s["task_type"] == "pick_and_place_simple")


def _trial(root, rel, traj=None, game=None):
    d = root / rel
    d.mkdir(parents=True)
    if traj is not None:
        (d / "traj_data.json").write_text(traj if isinstance(traj, str) else json.dumps(traj))
    if game is not None:
        (d / "game.tw-pddl").write_text(game if isinstance(game, str) else json.dumps(game))
    return d


@pytest.fixture(scope="module")
def game():
    return gen.make_game(SPEC["fp"], SPEC["task_type"], SPEC["seed"])


@pytest.fixture
def tree(tmp_path, game):
    """valid_seen: one good trial, filtered ones (movable, unsolvable) and one of each bad kind."""
    split = tmp_path / "json_2.1.1" / "valid_seen"
    gen.write_game(game, split)
    good_traj, good_game = game["traj_data"], game["game"]
    no_params = {k: v for k, v in good_traj.items() if k != "pddl_params"}
    bad = {
        "bad-corrupt_game/trial_1": _trial(split, "bad-corrupt_game/trial_1", good_traj, json.dumps(good_game)[:500]),
        "bad-no_traj/trial_1": _trial(split, "bad-no_traj/trial_1", None, good_game),
        "bad-corrupt_traj/trial_1": _trial(split, "bad-corrupt_traj/trial_1", "{\"task_type\": ", good_game),
        "bad-no_params/trial_1": _trial(split, "bad-no_params/trial_1", no_params, good_game),
        "bad-no_solvable/trial_1": _trial(split, "bad-no_solvable/trial_1", good_traj,
                                          {k: v for k, v in good_game.items() if k != "solvable"}),
        "bad-no_game/trial_1": _trial(split, "bad-no_game/trial_1", good_traj, None),
    }
    _trial(split, "movable_recep-x/trial_1", good_traj, good_game)
    _trial(split, "unsolvable-x/trial_1", good_traj, {**good_game, "solvable": False})
    return tmp_path, split, bad


def test_bad_trials_are_skipped_named_and_counted(tree, caplog):
    tmp_path, split, bad = tree
    with caplog.at_level(logging.WARNING, logger="envs.alfworld"):
        env = ALFWorldEnv(split="valid_seen", data_dir=str(tmp_path), expert=False)
    good = SPEC["task_id"]
    assert list(env.task_ids()) == [good]
    assert set(env.skipped_trials) == set(bad)
    why = env.skipped_trials
    for trial, file, reason in (("bad-corrupt_game", "game.tw-pddl", "not valid JSON"),
                                ("bad-no_traj", "game.tw-pddl", "no traj_data.json"),
                                ("bad-corrupt_traj", "traj_data.json", "not valid JSON"),
                                ("bad-no_params", "traj_data.json", "missing key 'pddl_params'"),
                                ("bad-no_solvable", "game.tw-pddl", "no 'solvable'")):
        key = f"{trial}/trial_1"
        assert why[key].startswith(f"{bad[key] / file}: {reason}"), why[key]
    assert why["bad-no_game/trial_1"].startswith(f"{bad['bad-no_game/trial_1'] / 'traj_data.json'}: no game.tw-pddl")
    (rec,) = [r for r in caplog.records if "bad trial" in r.getMessage()]   # one warning for the split
    assert "skipped 6 bad trial(s) of 9" in rec.getMessage() and str(split) in rec.getMessage()
    obs, info = env.reset(options={"task_id": good})            # the good trial still plays
    assert info["task_type"] == "pick_and_place_simple" and info["ground_truth"]["object_target"] == SPEC["obj"]


def test_empty_split_says_where_it_looked(tree):
    tmp_path, split, bad = tree
    only_bad = tmp_path / "only_bad" / "valid_unseen"
    _trial(only_bad, "a/trial_1", "not json", "{}")
    _trial(only_bad, "movable-b/trial_1", "{}", "{}")
    with pytest.raises(FileNotFoundError) as e:
        ALFWorldEnv(split="valid_unseen", data_dir=str(tmp_path / "only_bad"))
    msg = str(e.value)
    assert f"no playable ALFWorld game under {only_bad}" in msg and "found 2 trial folder(s), 1 filtered" in msg
    assert "1 bad" in msg and str(only_bad / "a" / "trial_1") in msg
    with pytest.raises(FileNotFoundError, match=r"data_dir=.*no 'train' folder under"):
        ALFWorldEnv(split="train", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"data_dir=.*nowhere': this path does not exist; point data_dir "
                                                 r"\(or \$ALFWORLD_DATA\) at the folder holding json_2.1.1"):
        ALFWorldEnv(split="train", data_dir=str(tmp_path / "nowhere"))


def test_malformed_pddl_is_caught_at_build_and_a_game_that_does_not_load_names_its_file(tree, game):
    """The pre-flight scan skips a game whose PDDL cannot parse (its parentheses), naming the file, before any
    reset; a game that passes the scan but fails TextWorld's parser still names its file at reset."""
    tmp_path, split, _ = tree
    cut = _trial(split, "cut_pddl/trial_1", game["traj_data"], {**game["game"], "pddl_problem": "(define (problem x"})
    extra = _trial(split, "extra_paren/trial_1", game["traj_data"],
                   {**game["game"], "pddl_domain": "(define (domain d))\n; (comment\n)"})
    d = _trial(split, "broken_pddl/trial_1", game["traj_data"],
               {**game["game"], "pddl_problem": "(define (problem x) (:objects ? ? ?))"})
    env = ALFWorldEnv(split="valid_seen", data_dir=str(tmp_path), expert=False)
    assert env.skipped_trials["cut_pddl/trial_1"] == (f"{cut / 'game.tw-pddl'}: pddl_problem is malformed PDDL "
                                                      "(2 '(' never closed); " + official._FIX)
    assert "pddl_domain is malformed PDDL (an unmatched ')' on line 3)" in env.skipped_trials["extra_paren/trial_1"]
    assert str(extra) in env.skipped_trials["extra_paren/trial_1"]
    assert "broken_pddl/trial_1" in env.task_ids()   # balanced: only loading can tell
    with pytest.raises(RuntimeError, match=rf"^{d / 'game.tw-pddl'}: could not load this game \("):
        env.reset(options={"task_id": "broken_pddl/trial_1"})
    good = gen.task_id_of(game)
    assert env.reset(options={"task_id": good})[1]["task"]   # the env is still usable
    assert official.pddl_shape_error(game["game"]["pddl_problem"]) is None
    assert official.pddl_shape_error(game["game"]["pddl_domain"]) is None


def test_helpers_name_the_file(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"a": 1,\n "b": }')
    with pytest.raises(TrialError, match=rf"^{p}: not valid JSON \(Expecting value at line 2 column 7\)"):
        read_json(p)
    with pytest.raises(TrialError, match=rf"^{tmp_path / 'missing.json'}: cannot read"):
        read_json(tmp_path / "missing.json")
    p.write_text(json.dumps({"pddl_params": {"object_target": "Mug"}}))
    with pytest.raises(TrialError, match=rf"^{p}: missing key 'task_type'"):
        trial_meta(p)
