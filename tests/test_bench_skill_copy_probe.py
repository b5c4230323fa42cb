"""bench/skill_copy_probe.py: a play's off-plan steps replayed in the real ALFWorld env and re-scored with a real
model under the plain prompt, the analyzer's quoting step skill and the same skill without the quote."""

from __future__ import annotations

import json

import numpy as np
import pytest

TASK = "look_at_obj_in_light-Book-None-FloorLamp-202/trial_s13705898"   # in alfworld/smoke@v1
ENV = {"split": "valid_unseen", "data_dir": "", "expert": "sweep", "max_steps": 30}


def _response(action: str) -> str:
    return f"<think></think>\n<action>{action}</action>"


def _play(commands: list[str]) -> dict:
    """An episode record as opid-eval writes it, played here in the real env (plans read from it)."""
    import envs

    env = envs.make("alfworld", **ENV)
    _, info = env.reset(options={"task_id": TASK})
    plans = []
    for c in commands:
        plans.append(info["expert_actions"][0])
        _, _, term, trunc, info = env.step(c)
    return {"task_id": TASK, "won": False, "actions": commands, "responses": [_response(c) for c in commands],
            "expert_next": plans}


def test_divergence_token_is_where_the_command_leaves_the_plan(bench_module):
    from opid_rllib.models.resolve import load_tokenizer, resolve_model

    probe = bench_module("skill_copy_probe")
    tok = load_tokenizer(resolve_model("tiny"))
    response = _response("go to sofa 1")
    i = probe.divergence_token(tok, response, "go to sofa 1", "go to armchair 1")
    offsets = tok(response, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    start, end = offsets[i]
    assert start <= response.index("sofa") < end              # the token holding the first differing character
    assert i > 0 and offsets[i - 1][1] <= response.index("sofa")
    assert probe.divergence_token(tok, response, "look", "go to armchair 1") is None


def test_probe_replays_the_play_and_scores_each_kind_once_per_game(bench_module, one_thread):
    from opid_rllib.models.resolve import load_model, load_tokenizer, resolve_model

    probe = bench_module("skill_copy_probe")
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
