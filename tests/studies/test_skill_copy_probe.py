"""studies/skill_copy_probe.py: a play's off-plan steps replayed in the real ALFWorld env and re-scored with a real
model under the plain prompt, the analyzer's quoting step skill and the same skill without the quote."""

from __future__ import annotations

import json

import numpy as np
import pytest

from studies import skill_copy_probe

TASK = "look_at_obj_in_light-Book-None-FloorLamp-202/trial_s13705898"   # in alfworld/smoke@v1
ENV = {"split": "valid_unseen", "data_dir": "", "expert": "sweep", "max_steps": 30}


def _response(action: str) -> str:
    return f"<think></think>\n<action>{action}</action>"


def _play(commands: list[str]) -> dict:
    """An episode record as opid-eval writes it, played here in the real env (plans read from it)."""
    import envs

    env = envs.make("alfworld", **ENV)
    _, info = env.reset(options={"task_id": TASK})
    plans, played = [], []
    for c in commands:   # None plays the plan's move
        plans.append(info["expert_actions"][0])
        played.append(c or plans[-1])
        _, _, term, trunc, info = env.step(played[-1])
    return {"task_id": TASK, "won": False, "actions": played, "responses": [_response(c) for c in played],
            "expert_next": plans}


def test_divergence_token_is_where_the_command_leaves_the_plan():
    from opid_rllib.models.resolve import load_tokenizer, resolve_model

    probe = skill_copy_probe
    tok = load_tokenizer(resolve_model("tiny"))
    response = _response("go to sofa 1")
    i = probe.divergence_token(tok, response, "go to sofa 1", "go to armchair 1")
    offsets = tok(response, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    start, end = offsets[i]
    assert start <= response.index("sofa") < end              # the token holding the first differing character
    assert i > 0 and offsets[i - 1][1] <= response.index("sofa")
    assert probe.divergence_token(tok, response, "look", "go to armchair 1") is None


def test_probe_replays_the_play_and_scores_each_kind_once_per_game(one_thread):
    from opid_rllib.models.resolve import load_model, load_tokenizer, resolve_model

    probe = skill_copy_probe
    path = resolve_model("tiny")
    model, tok = load_model(path).eval(), load_tokenizer(path)
    # off plan: a well-formed walk, the same walk again (a loop: scored once), an ill-formed take
    episode = _play(["go to sofa 1", "go to sofa 1", "take book from sofa 1"])
    assert episode["expert_next"][0] == "go to armchair 1"
    steps, counts = probe.probe(model, tok, [episode], env_kwargs=ENV, history_length=2, max_per_kind=5,
                                max_prompt_len=2048)
    assert counts == {"episodes": 1, "replay_mismatch": 0}
    assert [s["action"] for s in steps["well_formed"]] == ["go to sofa 1"]
    assert [s["action"] for s in steps["ill_formed"]] == ["take book from sofa 1"]
    ill = steps["ill_formed"][0]      # the analyzer's own sentences for the step, with and without the quote
    assert ill["skill_quoted"] == "At this point, go to armchair 1 instead of 'take book from sofa 1'."
    assert ill["skill_unquoted"] == "At this point, go to armchair 1."
    for s in steps["well_formed"] + steps["ill_formed"]:
        n = len(tok(_response(s["action"]), add_special_tokens=False)["input_ids"])
        assert len(s["delta_quoted"]) == len(s["delta_unquoted"]) == n
        assert np.any(np.asarray(s["delta_quoted"]) != 0) and s["divergence"] is not None
    row = probe.summary(steps["ill_formed"])
    d = np.asarray(steps["ill_formed"][0]["delta_quoted"])
    assert row["quoted"]["after_divergence_median"] == pytest.approx(d[steps["ill_formed"][0]["divergence"] + 1:].sum(),
                                                                     abs=1e-3)
    # a play whose recorded plan the replay does not reproduce is dropped and counted, not scored
    bad = json.loads(json.dumps(episode))
    bad["expert_next"][0] = "go to sofa 1"
    steps, counts = probe.probe(model, tok, [bad], env_kwargs=ENV, history_length=2, max_per_kind=5,
                                max_prompt_len=2048)
    assert counts["replay_mismatch"] == 1 and not steps["well_formed"] and not steps["ill_formed"]


def test_episode_mode_scores_every_kind_under_the_analyzers_episode_skill_for_the_whole_game(one_thread):
    from opid_rllib.models.resolve import load_model, load_tokenizer, resolve_model

    probe = skill_copy_probe
    path = resolve_model("tiny")
    model, tok = load_model(path).eval(), load_tokenizer(path)
    episode = _play(["go to sofa 1", "go to sofa 1", "take book from sofa 1", None])   # None: the plan's move
    on_plan = episode["actions"][3]
    assert on_plan == episode["expert_next"][3]
    steps, counts = probe.probe(model, tok, [episode], env_kwargs=ENV, history_length=2, max_per_kind=5,
                                max_prompt_len=2048, skill="episode")
    assert counts == {"episodes": 1, "replay_mismatch": 0}
    assert [s["action"] for s in steps["well_formed"]] == ["go to sofa 1"]      # the loop: once per game
    assert [s["action"] for s in steps["ill_formed"]] == ["take book from sofa 1"]
    assert [s["action"] for s in steps["on_plan"]] == [on_plan] and steps["on_plan"][0]["divergence"] is None
    rows = steps["well_formed"] + steps["ill_formed"] + steps["on_plan"]
    skill = rows[0]["skill_episode"]     # the failure skill the hindsight analyzer writes for the whole game
    bare = rows[0]["skill_episode_unquoted"]                  # and the same with quote_sampled=False
    assert all(r["skill_episode"] == skill and r["skill_episode_unquoted"] == bare for r in rows)
    assert "delta_quoted" not in rows[0]
    assert skill.startswith("Goal: ") and "chose 'go to sofa 1' instead of 'go to armchair 1'" in skill
    assert "'go to sofa 1'" not in bare and "whose next move was 'go to armchair 1'" in bare
    for r in rows:
        n = len(tok(_response(r["action"]), add_special_tokens=False)["input_ids"])
        for k in ("delta_episode", "delta_episode_unquoted"):
            assert len(r[k]) == n and np.any(np.asarray(r[k]) != 0)
    row = probe.summary(steps["ill_formed"] + steps["well_formed"])
    assert set(row) == {"steps", "with_divergence", "episode", "episode_unquoted"}
    sums = [sum(r["delta_episode"]) for r in steps["ill_formed"] + steps["well_formed"]]
    assert row["episode"]["seq_sum_median"] == pytest.approx(np.median(sums), abs=1e-3)
    # 'go to sofa 1' is quoted in the skill, the ill-formed take is not (the skill quotes one looping command)
    split = {k: row["episode_unquoted"][k]["steps"] for k in ("quoted_in_skill", "not_quoted_in_skill")}
    assert split == {"quoted_in_skill": sum(f"'{r['action']}'" in skill for r in rows[:2]),
                     "not_quoted_in_skill": sum(f"'{r['action']}'" not in skill for r in rows[:2])}
    assert split["quoted_in_skill"] >= 1
    assert row["episode"]["quoted_in_skill"]["seq_sum_median"] == pytest.approx(
        np.median([sum(r["delta_episode"]) for r in rows[:2] if f"'{r['action']}'" in skill]), abs=1e-3)
    # a game the replay leaves is not the game the analyzer would have read: step mode scores the steps before the
    # cut, episode mode none of them
    bad = json.loads(json.dumps(episode))
    bad["expert_next"][3] = "look"
    for mode, n in (("step", 2), ("episode", 0)):
        steps, counts = probe.probe(model, tok, [bad], env_kwargs=ENV, history_length=2, max_per_kind=5,
                                    max_prompt_len=2048, skill=mode)
        assert counts["replay_mismatch"] == 1 and sum(map(len, steps.values())) == n
    with pytest.raises(ValueError, match="skill='both'"):
        probe.probe(model, tok, [episode], env_kwargs=ENV, history_length=2, max_per_kind=5, max_prompt_len=2048,
                    skill="both")
