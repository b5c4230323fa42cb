"""env_config is checked where every caller builds an env (opid-train, opid-eval, opid-sft, the runner): a misspelt
key or a value of the wrong kind is an error that names the setting, never dropped or a bare int() error."""

import pytest

import envs


@pytest.mark.parametrize("name, settings, says", [
    ("alfworld", {"expret": "sweep"}, "alfworld env: unknown setting(s) ['expret']"),
    ("alfworld", {"expret": "sweep"}, "known: ['cache_dir', 'data_dir', 'expert', 'max_steps', 'split']"),
    ("webshop", {"sed": 3}, "webshop env: unknown setting(s) ['sed']"),
    ("searchqa", {"top_k": 3}, "searchqa env: unknown setting(s) ['top_k']"),
    ("alfworld", {"max_steps": "abc"}, "env setting max_steps='abc': must be an integer"),
    ("searchqa", {"topk": "x"}, "env setting topk='x': must be an integer"),
    ("searchqa", {"timeout": "abc"}, "env setting timeout='abc': must be a number"),
    ("webshop", {"seed": "abc"}, "env setting seed='abc': must be an integer"),
    ("webshop", {"expert": "handcodd"}, "expert='handcodd': choose True/False (or 'handcoded'/'none')"),
    ("webshop", {"server_task_range": [5]}, "server_task_range=[5]: give (start, stop)"),
])
def test_bad_settings_name_themselves(name, settings, says):
    with pytest.raises(ValueError) as info:
        envs.make(name, **settings)
    assert says in str(info.value)


def test_webshop_takes_alfworlds_expert_names():
    """'none' used to be a truthy string, so the plan stayed on; now it turns the expert off, as in ALFWorld."""
    off, on = envs.make("webshop", expert="none"), envs.make("webshop", expert="handcoded")
    task = off.task_ids()[0]
    assert "expert_actions" not in off.reset(options={"task_id": task})[1]
    assert on.reset(options={"task_id": task})[1]["expert_actions"]


def test_string_numbers_are_taken():
    assert envs.make("searchqa", topk="2", max_steps="4").topk == 2
