"""`opid-eval --episodes K` (and validation's evaluation_duration K) play K games taken in turn from each task type:
a panel lists its games by type, and its first 4 were all ALFWorld 'Look' games."""

from __future__ import annotations

from envs.panels import get_panel, spread_note, spread_over_types, task_type_of


def test_k_games_come_in_turn_from_each_type_in_panel_order():
    ids = list(get_panel("alfworld/valid_unseen@v1").task_ids)
    types = list(dict.fromkeys(task_type_of(t) for t in ids))
    assert len(types) == 6 and types[0] == "look_at_obj_in_light"
    four = spread_over_types(ids, 4)
    assert [task_type_of(t) for t in four] == types[:4]
    twelve = spread_over_types(ids, 12)
    assert [task_type_of(t) for t in twelve] == types * 2
    assert all(ids.index(a) < ids.index(b) for a, b in zip(twelve, twelve[6:]))  # each type's games in panel order
    assert spread_over_types(ids, None) == ids and spread_over_types(ids, 500) == ids
    assert spread_note(four, len(ids)) == ("playing 4 of the panel's 126 games, in turn from each task type: "
                                           + ", ".join(f"{t} 1" for t in types[:4]))


def test_a_type_that_runs_out_leaves_the_others_their_turns():
    ids = ["a-1", "b-1", "b-2", "b-3", "c-1"]
    assert spread_over_types(ids, 4) == ["a-1", "b-1", "c-1", "b-2"]
    # one type (WebShop's and search-QA's ids): the panel's first K, as before
    search = list(get_panel("searchqa/test@v1").task_ids)
    assert spread_over_types(search, 5) == search[:5]
    assert spread_note(search[:5], len(search)) == f"playing 5 of the panel's {len(search)} games, the first ones"


def test_validation_plays_the_games_opid_eval_plays():
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.evaluation import eval_task_list

    cfg = OPIDConfig().environment("alfworld").evaluation(evaluation_interval=1, evaluation_duration=6,
                                                          evaluation_duration_unit="episodes",
                                                          eval_panel="alfworld/valid_unseen@v1")
    assert eval_task_list(cfg) == spread_over_types(get_panel("alfworld/valid_unseen@v1").task_ids, 6)


def test_cpu_example_panel_is_six_train_games_one_per_task_type():
    from envs.alfworld.generator import TASK_TYPES
    from envs.alfworld.panels import _split_ids
    from envs.panels import get_panel, task_type_of

    panel = get_panel("alfworld/cpu_example@v1")
    assert panel.split == "train" and set(panel.task_ids) <= set(_split_ids("train"))
    assert sorted(task_type_of(t) for t in panel.task_ids) == sorted(TASK_TYPES)
