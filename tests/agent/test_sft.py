"""opid-sft's training side: response tokens, batching, the CLI, a tiny SFT run that learns and saves a loadable
HF folder, resume, bf16, progress lines, expert agreement, greedy evaluation, the quickstart's wiring (what the
demonstrations hold: test_sft_demos.py).

Fast by design: the training test uses a handful of demos, a 128-token prompt window and two epochs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from opid_rllib.sft.demos import collect_demonstrations
from opid_rllib.sft.train import encode_demos, encode_response, length_batches, micro_batches


def test_response_tokens_round_trip():
    """What the HF backend decodes from the target tokens is the target text; EOS is <|im_end|>."""
    from opid_rllib.models import load_tokenizer, resolve_model

    tok = load_tokenizer(resolve_model("tiny"))
    demos = collect_demonstrations("webshop", num_tasks=2, history_length=5, max_steps=30, seed=0)
    for d in demos:
        ids = encode_response(tok, d.response)
        assert ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")
        assert tok.decode(ids, skip_special_tokens=True) == d.response
    p, r, cut = encode_demos(tok, demos, max_prompt_len=64)
    assert cut == len(demos) and all(len(x) == 64 for x in p)


def test_batching_helpers():
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(10, 500, size=23)]
    batches = length_batches(lengths, 4, np.random.default_rng(1))
    assert sorted(i for b in batches for i in b) == list(range(23))
    assert batches == length_batches(lengths, 4, np.random.default_rng(1))
    for b in batches:
        mbs = micro_batches(b, lengths, 600)
        assert sorted(i for m in mbs for i in m) == sorted(b)
        assert all(len(m) == 1 or max(lengths[i] for i in m) * len(m) <= 600 for m in mbs)


def test_cli_rejects_bad_input(tmp_path, capsys):
    from opid_rllib.cli.sft import main

    out = tmp_path / "m"
    assert main(["--env", "nethack", "--out", str(out)]) == 2
    assert "unknown" in capsys.readouterr().err
    assert main(["--env", "searchqa", "--out", str(out), "--tasks", "0"]) == 2
    assert "--tasks=0" in capsys.readouterr().err
    assert main(["--env", "searchqa", "--out", str(out), "--model", str(tmp_path / "nope")]) == 2
    assert "not a model folder" in capsys.readouterr().err
    (out / "x").parent.mkdir(parents=True)
    (out / "x").write_text("keep me")
    assert main(["--env", "searchqa", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["--env", "searchqa", "--out", str(tmp_path / "m2"), "--env-kwargs", "[1]"]) == 2
    for key, value in (("split", "train"), ("max_steps", 3)):  # they would override the flags, unnamed
        kwargs = f'{{"{key}": "{value}"}}'
        assert main(["--env", "searchqa", "--out", str(tmp_path / "m2"), "--env-kwargs", kwargs]) == 2
        assert f"--env-kwargs: '{key}' has its own flag" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--env", "searchqa"])  # --out is required (argparse exits 2)


def test_cpu_example_warm_start_takes_only_the_flags_written(tmp_path, capsys):
    """opid-sft --cpu-example builds the CPU example's warm start (the learning gate's rung-1 base): on ALFWorld only,
    into an empty --out; the flags written change its recipe, argparse's defaults do not."""
    from opid_rllib.cli.sft import given_flags, main

    assert main(["--env", "signpost", "--cpu-example", "--out", str(tmp_path / "m")]) == 2
    assert "on ALFWorld, not --env signpost" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    assert main(["--env", "alfworld", "--cpu-example", "--out", str(tmp_path / "full")]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert given_flags(["--env", "alfworld", "--cpu-example", "--out", "x", "--epochs", "1"]) == \
        {"env", "cpu_example", "out", "epochs"}


def test_sft_run_learns_and_saves_a_loadable_folder(tmp_path, one_thread, capsys):
    """Tiny run through the CLI: loss goes down, the folder reloads with AutoModelForCausalLM and
    resolve_model, reproduces the trained model's loss, and the SFT log-probs equal the learner's."""
    import torch
    from transformers import AutoModelForCausalLM

    from opid_rllib.cli.sft import main
    from opid_rllib.models import load_model, load_tokenizer, resolve_model
    from opid_rllib.rl_module import pack as rl_pack
    from opid_rllib.rl_module import response_logprobs
    from opid_rllib.sft.train import demo_loss

    out = tmp_path / "sft"
    plen = 64
    argv = ["--env", "searchqa", "--model", "tiny", "--out", str(out), "--tasks", "2", "--epochs", "2",
            "--batch-size", "2", "--lr", "5e-3", "--max-prompt-len", str(plen), "--max-steps", "4", "--seed", "0",
            "--skill-fraction", "0.5", "--torch-threads", "1"]
    assert main(argv) == 0
    stats = json.loads((out / "sft_stats.json").read_text())
    demos = collect_demonstrations("searchqa", num_tasks=2, history_length=5, max_steps=4, seed=0, skill_fraction=0.5)
    assert stats["demos"] == len(demos) and stats["collection"]["episodes_won"] == 2
    assert len(stats["loss_curve"]) == 2 and stats["wall_seconds"] > 0
    err = capsys.readouterr().err  # the last step always gets a progress line with an ETA
    assert f"step {stats['optimizer_steps']}/{stats['optimizer_steps']} (100%) epoch-mean loss" in err and "ETA 0s" in err
    assert not (out / "sft_checkpoint").exists()  # removed once the final model is written

    base = resolve_model("tiny")
    tok = load_tokenizer(base)
    p, r, _ = encode_demos(tok, demos, max_prompt_len=plen)
    before = demo_loss(load_model(base), p, r, tok.pad_token_id)
    k = stats["final_eval_samples"]
    assert k == len(demos)
    reloaded = AutoModelForCausalLM.from_pretrained(out).eval()
    after = demo_loss(reloaded, p, r, tok.pad_token_id)
    assert after == pytest.approx(stats["final_eval_loss"], rel=1e-4)
    assert after < before - 0.5, (before, after)
    assert stats["loss_curve"][-1]["loss"] < stats["loss_curve"][0]["loss"]
    # each step's loss is kept (step 1's, the pretrained weights' on one batch, tells early whether a rebuild on
    # another machine rounds like the recorded one); an epoch's loss is their token-weighted mean
    for c in stats["loss_curve"]:
        assert len(c["step_losses"]) == stats["optimizer_steps"] // 2
        assert min(c["step_losses"]) <= c["loss"] <= max(c["step_losses"])
    assert min(stats["loss_curve"][-1]["step_losses"]) < stats["loss_curve"][0]["step_losses"][0]

    # resolve_model(path) opens the folder; same weights -> same logits
    assert resolve_model(str(out)) == out
    opid_loaded = load_model(resolve_model(str(out))).eval()
    ids = torch.as_tensor([p[0] + r[0]])
    with torch.no_grad():
        torch.testing.assert_close(opid_loaded(input_ids=ids).logits, reloaded(input_ids=ids).logits)
    assert load_tokenizer(out)(demos[0].response, add_special_tokens=False)["input_ids"] == r[0][:-1]


    # the SFT loss is the RL learner's own log-prob computation: token-mean NLL of the responses
    b = {key: torch.as_tensor(v) for key, v in rl_pack(p[:4], r[:4], tok.pad_token_id).items()}
    with torch.no_grad():
        ref, _ = response_logprobs(reloaded, b["prompt_ids"], b["prompt_len"], b["response_ids"], b["response_len"])
    want = -(ref.sum() / b["response_len"].sum()).item()
    assert demo_loss(reloaded, p[:4], r[:4], tok.pad_token_id) == pytest.approx(want, rel=1e-5)


def _tiny_demos():
    return collect_demonstrations("searchqa", num_tasks=2, history_length=5, max_steps=4, seed=0, skill_fraction=0.5)


def test_interrupted_sft_resumes_to_the_same_weights(tmp_path, one_thread):
    """2 epochs straight vs. stopped after epoch 1 (a KeyboardInterrupt right after its checkpoint)
    and run again: the resumed run starts at epoch 2 and ends with bit-identical weights."""
    import torch
    from safetensors.torch import load_file

    from opid_rllib.models import resolve_model
    from opid_rllib.sft.checkpoint import ResumeMismatch
    from opid_rllib.sft.train import train_sft

    demos, base = _tiny_demos(), resolve_model("tiny")
    kw = dict(epochs=2, lr=5e-3, batch_size=2, max_prompt_len=64, seed=0, progress_every_s=-1)
    straight = train_sft(base, demos, tmp_path / "a", log=None, **kw)

    def stop_after_epoch_1(msg):
        if "epoch 1/2" in msg:
            raise KeyboardInterrupt

    out = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):
        train_sft(base, demos, out, log=stop_after_epoch_1, **kw)
    assert (out / "sft_checkpoint" / "state.pt").is_file() and not (out / "model.safetensors").exists()
    with pytest.raises(ResumeMismatch, match=r"lr: 0.005 -> 0.004.*--no-resume"):
        train_sft(base, demos, out, log=None, **{**kw, "lr": 4e-3})

    logs = []
    train_sft(base, demos, out, log=logs.append, **kw)
    assert any("resuming from" in m and "epoch 1/2 done" in m for m in logs)
    assert sum(m.startswith("[opid-sft] epoch ") for m in logs) == 1  # only epoch 2 ran
    stats = json.loads((out / "sft_stats.json").read_text())
    assert stats["resumed_from_epoch"] == 1 and len(stats["loss_curve"]) == 2
    curve = lambda st: [(c["epoch"], c["loss"], c["lr"]) for c in st["loss_curve"]]  # noqa: E731
    assert curve(stats) == curve(json.loads((straight / "sft_stats.json").read_text()))
    a, b = load_file(straight / "model.safetensors"), load_file(out / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:3]
    assert not (out / "sft_checkpoint").exists()

    # --no-resume starts over (a fresh 2-epoch run) and still gives the same weights
    with pytest.raises(KeyboardInterrupt):
        train_sft(base, demos, tmp_path / "c", log=stop_after_epoch_1, **kw)
    logs = []
    train_sft(base, demos, tmp_path / "c", log=logs.append, resume=False, **kw)
    assert not any("resuming" in m for m in logs) and sum(m.startswith("[opid-sft] epoch ") for m in logs) == 2


def test_bf16_sft_keeps_fp32_weights_and_learns_like_fp32(tmp_path, one_thread):
    """dtype="bfloat16" computes under autocast over fp32 weights: the saved weights are fp32, differ from the
    fp32 run's (bf16 really ran) and the loss falls as far; a bf16 checkpoint does not resume as float32."""
    import torch
    from safetensors.torch import load_file

    from opid_rllib.models import resolve_model
    from opid_rllib.sft.checkpoint import ResumeMismatch
    from opid_rllib.sft.train import train_sft

    demos, base = _tiny_demos(), resolve_model("tiny")
    kw = dict(epochs=2, lr=5e-3, batch_size=2, max_prompt_len=64, seed=0, progress_every_s=-1, log=None)
    a = train_sft(base, demos, tmp_path / "fp32", **kw)
    b = train_sft(base, demos, tmp_path / "bf16", dtype="bfloat16", **kw)
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert {v.dtype for v in wb.values()} == {torch.float32}
    assert any(not torch.equal(wa[k], wb[k]) for k in wa)
    sa, sb = (json.loads((d / "sft_stats.json").read_text()) for d in (a, b))
    assert (sa["dtype"], sb["dtype"]) == ("float32", "bfloat16")
    assert sb["loss_curve"][1]["loss"] < sb["loss_curve"][0]["loss"]
    assert sb["final_eval_loss"] == pytest.approx(sa["final_eval_loss"], rel=0.1)
    with pytest.raises(ValueError, match=r"dtype='float16'.*float32.*bfloat16"):
        train_sft(base, demos, tmp_path / "x", dtype="float16", **kw)

    out = tmp_path / "partial"
    with pytest.raises(KeyboardInterrupt):
        train_sft(base, demos, out, dtype="bfloat16", **{**kw, "log": lambda m: (_ for _ in ()).throw(
            KeyboardInterrupt) if "epoch 1/2" in m else None})
    with pytest.raises(ResumeMismatch, match="dtype: 'bfloat16'"):
        train_sft(base, demos, out, **kw)


def test_cli_resumes_a_partial_run_without_overwrite(tmp_path, one_thread, capsys):
    """A stopped `opid-sft` leaves a checkpoint in --out: the same command resumes (no --overwrite
    needed); a non-empty --out without a checkpoint still needs --overwrite."""
    from opid_rllib.cli.sft import main
    from opid_rllib.models import resolve_model
    from opid_rllib.sft.train import train_sft

    out = tmp_path / "sft"
    with pytest.raises(KeyboardInterrupt):
        train_sft(resolve_model("tiny"), _tiny_demos(), out, epochs=2, lr=5e-3, batch_size=2, max_prompt_len=64,
                  seed=0, progress_every_s=-1, log=lambda m: (_ for _ in ()).throw(KeyboardInterrupt)
                  if "epoch 1/2" in m else None)
    argv = ["--env", "searchqa", "--model", "tiny", "--out", str(out), "--tasks", "2", "--epochs", "2",
            "--batch-size", "2", "--lr", "5e-3", "--max-prompt-len", "64", "--max-steps", "4", "--seed", "0",
            "--skill-fraction", "0.5"]
    assert main(argv) == 0
    assert "resuming from" in capsys.readouterr().out
    assert json.loads((out / "sft_stats.json").read_text())["resumed_from_epoch"] == 1
    assert main(argv) == 2 and "--overwrite" in capsys.readouterr().err


def test_progress_lines_are_throttled_with_an_eta():
    from opid_rllib.sft.progress import Progress, fmt_s

    now = [0.0]
    lines = []
    p = Progress(100, every_s=10.0, start_step=20, write=lines.append, clock=lambda: now[0])
    for step in range(21, 101):
        now[0] += 1.0  # 1 s per step
        p.update(step, loss=0.5)
    assert len(lines) == 8  # every 10 s over 80 s (the last step lands on a 10 s mark)
    assert lines[0] == "[opid-sft] step 30/100 (30%) loss 0.5000 | elapsed 10s | ETA 1m10s", lines[0]
    assert lines[-1].endswith("ETA 0s")
    assert fmt_s(3725) == "1h02m05s"

    games = []  # the expert collection reports each finished game (ALFWorld's takes minutes)
    collect_demonstrations("searchqa", num_tasks=3, history_length=5, max_steps=4, seed=0,
                           progress=lambda n, **kw: games.append((n, kw["won"])))
    assert games == [(1, 1), (2, 2)]
    g = []
    Progress(3, prefix="[x]", unit="game", every_s=0, write=g.append).update(3, won=2)
    assert g[0].startswith("[x] game 3/3 (100%) won 2 |"), g


def test_expert_agreement_counts_valid_steps_matching_the_plan():
    from opid_rllib.paper_table import expert_agreement

    recs = [{"actions": ["go to desk 1", "take pen", "look"], "format_valid": [True, False, True],
             "expert_next": ["Go to  desk 1", "take pen", None]},
            {"actions": ["open drawer 1"], "format_valid": [True]}]  # no plan: not counted
    assert expert_agreement("alfworld", recs) == pytest.approx(0.5)  # 2 planned steps, 1 valid + equal



def test_agreement_by_the_experts_command_kind():
    """The split that shows a policy walking right but never picking the object up (studies/eval_agreement.py
    re-reads opid-eval folders into it: tests/studies/test_tools.py)."""
    from opid_rllib.eval.headroom import format_headroom
    from opid_rllib.paper_table import command_kind, expert_agreement, expert_agreement_by_kind, summarize

    assert [command_kind(c) for c in ["Go to  desk 1", "take pen 1 from desk 1", "<search>who</search>",
                                      "click[Buy Now]", "  "]] == ["go to", "take", "search", "click", "other"]
    recs = [{"task_type": "pick_and_place_simple", "won": False, "length": 4,
             "actions": ["go to desk 1", "go to desk 1", "take pen 1 from desk 1", "go to bed 1"],
             "format_valid": [True, True, False, True],
             "expert_next": ["go to desk 1", "take pen 1 from desk 1", "take pen 1 from desk 1", "go to bed 1"]},
            {"task_type": "pick_and_place_simple", "won": True, "length": 1, "actions": ["take cd 1 from bed 1"],
             "format_valid": [True], "expert_next": ["take cd 1 from bed 1"]}]
    by = expert_agreement_by_kind("alfworld", recs)
    assert by == {"take": {"pct": 33.33, "steps": 3}, "go to": {"pct": 100.0, "steps": 2}}  # most planned first
    assert expert_agreement("alfworld", recs) == pytest.approx(3 / 5)
    student = summarize(recs, "alfworld")
    assert student["expert_agreement_by_kind"] == by
    teacher = summarize([dict(r, actions=list(r["expert_next"]), format_valid=[True] * r["length"]) for r in recs],
                        "alfworld")
    assert "student / teacher: take 33.3 / 100.0, go to 100.0 / 100.0" in format_headroom(student, teacher)


@pytest.mark.slow
def test_evaluate_greedy_plays_through_the_eval_runner(one_thread):
    """evaluate_greedy is opid-eval's path (GroupedTextEnvRunner via play_tasks): same per-episode
    actions as `evaluate` on the same tasks, plus the expert's plan per step."""
    from envs.panels import Panel
    from opid_rllib.eval.panel import evaluate
    from opid_rllib.sft.greedy import evaluate_greedy

    ids = ["searchqa-train-00000", "searchqa-train-00001"]
    kw = dict(history_length=5, max_steps=2, max_new_tokens=8, max_prompt_len=64)
    ev = evaluate_greedy("tiny", "searchqa", ids, **kw)
    assert ev["episodes"] == 2 and set(ev["won"]) == set(ids) and 1.0 <= ev["mean_steps"] <= 2.0
    assert all(len(r["expert_next"]) == r["length"] for r in ev["records"])
    ref = evaluate(panel=Panel("searchqa/x", "searchqa", "train", tuple(ids)), llm_model="tiny", temperature=0.0,
                   progress=False, batch_envs=32, **kw)
    assert [r["actions"] for r in ref["episodes"]] == [r["actions"] for r in ev["records"]]


def test_quickstart_modes(tmp_path):
    """scripts/quickstart.sh: quick mode by default, the full recipe behind --full, bad flags exit 2.
    The opid-* commands are replaced by stubs that log their argv (this checks the script's wiring;
    the commands themselves are tested above and in their own tests)."""
    import os
    import subprocess

    script = Path(__file__).resolve().parents[2] / "scripts" / "quickstart.sh"
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for cmd in ("opid-sft", "opid-train", "opid-export", "opid-eval", "opid-report", "python-stub"):
        (bin_dir / cmd).write_text(f'#!/bin/sh\necho "{cmd} $* threads=$OMP_NUM_THREADS" >> "{log}"\n')
        (bin_dir / cmd).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "SFT_TASKS", "ITERS", "PANEL")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["PYTHON"] = str(bin_dir / "python-stub")  # the closing learning check runs $PYTHON tuned_examples/...

    def run(*args):
        log.unlink(missing_ok=True)
        p = subprocess.run(["bash", str(script), *args], env={**env, "OUT": str(tmp_path / "out")},
                           capture_output=True, text=True, timeout=60)
        return p, (log.read_text().splitlines() if log.exists() else [])

    p, calls = run()
    assert p.returncode == 0, p.stderr
    assert [c.split()[0] for c in calls] == ["opid-sft", "opid-train", "opid-export", "opid-eval", "opid-report",
                                             "python-stub"]
    assert "--tasks 20 --epochs 1" in calls[0] and "--torch-threads" not in calls[0]  # the commands' default: 1
    assert "tuned_examples/signpost_rung0.py --preset grpo" in calls[5] and "--plot" in calls[5]
    assert "Learning check: " + str(tmp_path / "out" / "rung0" / "success.png") in p.stdout
    env["RUNG0"] = "0"
    assert [c.split()[0] for c in run()[1]][-1] == "opid-report"
    del env["RUNG0"]
    assert "--stop-iters 1" in calls[1] and "--panel alfworld/smoke@v1" in calls[3]
    p, calls = run("--full")
    assert p.returncode == 0 and "--tasks 330 --epochs 4" in calls[0]
    env["TORCH_THREADS"] = "3"
    p, calls = run()
    assert all("--torch-threads 3 threads=" in c for c in calls[:2] + calls[3:4]), calls
    del env["TORCH_THREADS"]
    p, calls = run("--full")
    assert "--stop-iters 3" in calls[1] and "--panel alfworld/valid_unseen@v1" in calls[3]
    p, calls = run("--fast")
    assert p.returncode == 2 and "unknown argument --fast" in p.stderr and calls == []
    p, _ = run("--help")
    assert p.returncode == 0 and "--full" in p.stdout
