"""`opid-sft --demonstrator`: who plays the demonstration games (envs.make_demonstrator seam)."""

from __future__ import annotations

import pytest

import envs
from opid_rllib.sft.demos import collect_demonstrations

pytest.importorskip("alfworld")


def _episodes(demos):
    out: dict[str, list[str]] = {}
    for d in demos:
        if not d.hint_follow:
            out.setdefault(d.task_id, []).append(d.action)
    return out


def test_sweep_demos_are_the_sweep_games_and_not_the_experts():
    from envs.alfworld.env import ALFWorldEnv
    from envs.alfworld.sweep import play_sweep

    kw = dict(num_tasks=6, history_length=2, max_steps=30, seed=3, skill_fraction=0.0, response_style="action")
    stats: dict = {}
    sweep = _episodes(collect_demonstrations("alfworld", demonstrator="sweep", stats=stats, **kw))
    expert = _episodes(collect_demonstrations("alfworld", **kw))
    env = ALFWorldEnv(split="train", expert=False)
    assert len(sweep) == stats["episodes_won"] >= 4
    for task_id, actions in sweep.items():
        assert play_sweep(env, task_id, 30)["actions"] == actions
    assert any(expert.get(t) != a for t, a in sweep.items())


def test_unknown_demonstrators_are_named_errors(tmp_path, capsys):
    from opid_rllib.cli.sft import main

    assert envs.make_demonstrator("alfworld", "expert") is None
    with pytest.raises(ValueError, match=r"demonstrator='nope'.*'sweep'"):
        collect_demonstrations("alfworld", num_tasks=1, history_length=2, max_steps=5, seed=0, demonstrator="nope")
    with pytest.raises(ValueError, match=r"demonstrator='sweep': env 'searchqa' has \['expert'\]"):
        envs.make_demonstrator("searchqa", "sweep")
    assert main(["--env", "searchqa", "--out", str(tmp_path / "x"), "--demonstrator", "sweep"]) == 2
    assert "--demonstrator: demonstrator='sweep'" in capsys.readouterr().err
    assert main(["--env", "alfworld", "--out", str(tmp_path / "y"), "--demonstrator", "sweep",
                 "--policy-tasks", "1"]) == 2
    assert "labelled by the env's expert" in capsys.readouterr().err


def test_reproduced_is_greedy_decoding_and_splits_by_verb(tmp_path, one_thread):
    """sft.fit.reproduced (teacher-forced argmax) says exactly whether greedy decoding writes the response."""
    import dataclasses

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from opid_rllib.models import resolve_model
    from opid_rllib.sft.fit import by_verb, format_by_verb, reproduced
    from opid_rllib.sft.train import encode_demos, train_sft

    demos = collect_demonstrations("alfworld", num_tasks=1, history_length=1, max_steps=30, seed=0, skill_fraction=0.0,
                                   response_style="action", demonstrator="sweep")
    out = train_sft(resolve_model("tiny"), demos, tmp_path / "m", epochs=15, lr=5e-3, batch_size=2, max_prompt_len=512,
                    seed=0, progress_every_s=-1, log=None)
    tok, model = AutoTokenizer.from_pretrained(out), AutoModelForCausalLM.from_pretrained(out).eval()
    wrong = [dataclasses.replace(d, response=d.response.replace(d.action, d.action + " x")) for d in demos]
    hits = reproduced(model, tok, demos + wrong, max_prompt_len=512)
    prompts, responses, _ = encode_demos(tok, demos + wrong, 512)
    for p, r, hit in zip(prompts, responses, hits):
        with torch.no_grad():
            g = model.generate(torch.tensor([p]), max_new_tokens=len(r), do_sample=False,
                               pad_token_id=tok.pad_token_id)[0, len(p):].tolist()
        assert (g[:len(r)] == r) == hit
    n = len(demos)
    assert any(hits[:n]) and not any(h for h, ok in zip(hits[n:], hits[:n]) if ok)  # a changed command is not
    table = by_verb(demos + wrong, hits)
    assert table["all"] == {"states": 2 * n, "reproduced": sum(hits), "pct": round(100 * sum(hits) / (2 * n), 1)}
    assert sum(v["states"] for k, v in table.items() if k != "all") == 2 * n
    assert format_by_verb(table).endswith(f"all {table['all']['pct']:.1f} ({sum(hits)}/{2 * n})")
