"""The memory plan's numbers against real models: exact parameter counts, LoRA adapter counts and the
activation formula against what autograd really saves (tests/plan/saved_activations.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from saved_activations import build, saved_bytes  # noqa: E402

from opid_rllib.memory_plan import (GIB, KNOWN_ARCHS, LORA_TARGETS_ALL, PlanInput, activation_bytes,  # noqa: E402
                                    arch_from_hf_config, compute_plan, format_plan, lora_param_count, main,
                                    param_counts, resolve_arch)

REPO = Path(__file__).resolve().parents[2]


def numel(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are one Parameter: counted once


def test_tiny_param_count_equals_the_built_model():
    from transformers import AutoModelForCausalLM

    from opid_rllib.models import resolve_model

    model = AutoModelForCausalLM.from_pretrained(str(resolve_model("tiny")))
    assert param_counts(resolve_arch("tiny"))["total"] == numel(model)


@pytest.mark.parametrize("name", sorted(KNOWN_ARCHS))
def test_known_arch_counts_equal_a_meta_model(name):
    """The recipes' models built on the meta device (no memory, no weights) from the table's values."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

    a = KNOWN_ARCHS[name]
    kw = dict(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
              num_key_value_heads=a.kv_heads, intermediate_size=a.intermediate, vocab_size=a.vocab,
              tie_word_embeddings=a.tied)
    cfg = Qwen3Config(head_dim=a.head_dim, **kw) if a.qk_norm else Qwen2Config(**kw)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    assert arch_from_hf_config(cfg) == a
    assert param_counts(a)["total"] == numel(model)


def test_published_sizes():
    # Hand-checked: Qwen3-1.7B "1.7B (1.4B non-embedding)", Qwen2.5-3B "3.09B", Qwen2.5-7B "7.61B".
    got = {k: param_counts(a)["total"] for k, a in KNOWN_ARCHS.items()}
    assert got == {"Qwen/Qwen3-1.7B": 1_720_574_976, "Qwen/Qwen2.5-3B-Instruct": 3_085_938_688,
                   "Qwen/Qwen2.5-7B-Instruct": 7_615_616_512}
    c = param_counts(KNOWN_ARCHS["Qwen/Qwen3-1.7B"])
    # per layer: q 2048*2048 + k, v 2048*1024 each + o 2048*2048 + MLP 3*2048*6144 + norms 2*2048 + q/k norm 2*128
    assert c["total"] - c["embedding"] == 28 * 50_336_000 + 2048 == 1_409_410_048


def test_lora_count_by_hand_and_by_peft():
    # 7B, r=64, all seven linears: 64 * [(3584+3584) + 2*(3584+512) + (3584+3584) + 2*(3584+18944)
    # + (18944+3584)] = 64 * 90112 per layer, x 28 layers.
    assert lora_param_count(KNOWN_ARCHS["Qwen/Qwen2.5-7B-Instruct"], 64) == 64 * 90112 * 28 == 161_480_704
    pytest.importorskip("peft")
    model = build("qwen2", layers=2, lora_r=8)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert lora_param_count(arch_from_hf_config(model.config), 8, LORA_TARGETS_ALL) == trainable
    with pytest.raises(ValueError, match="lm_head"):
        lora_param_count(KNOWN_ARCHS["Qwen/Qwen3-1.7B"], 8, ["lm_head"])


# Shapes unlike the ones the coefficients were read from (h 256, i 512, 2 layers).
SHAPES = dict(h=384, layers=3, heads=6, kv_heads=2, head_dim=64, inter=1024, vocab=4000)


@pytest.mark.parametrize("family", ["qwen3", "qwen2"])
@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_formula_matches_saved_tensors(family, lora, checkpointing):
    if lora:
        pytest.importorskip("peft")
    model = build(family, lora_r=16 if lora else 0, base_dtype=torch.bfloat16 if lora else torch.float32, **SHAPES)
    a = arch_from_hf_config(model.config)
    b, p, r = 3, 56, 12
    measured = saved_bytes(model, batch=b, prompt=p, response=r, checkpointing=checkpointing)
    predicted = activation_bytes(a, batch=b, prompt=p, response=r, checkpointing=checkpointing, lora=lora,
                                 lora_r=16 if lora else 0, lora_targets=7 if lora else 0, peak=False)
    # Measured: within 0.02 % (full) / 1.5 % (LoRA) without checkpointing, 4 % with it.
    assert predicted == pytest.approx(measured, rel=0.05 if checkpointing else 0.02), (predicted, measured)


def test_plan_rows_follow_the_design():
    full = compute_plan(PlanInput("Qwen/Qwen3-1.7B", micro_batch_size=4, gradient_checkpointing=True))
    n = full["params"] / GIB
    rows = full["devices"]["learner GPU"]
    assert rows["weights"] == pytest.approx(4 * n) and rows["optimizer (AdamW m, v fp32)"] == pytest.approx(8 * n)
    assert rows["KL reference model (bfloat16)"] == pytest.approx(2 * n)
    assert full["activations_gib"]["checkpointing"] < full["activations_gib"]["no checkpointing"]
    lora = compute_plan(PlanInput("Qwen/Qwen2.5-7B-Instruct", lora={"r": 64}, kl_coeff=0.01))
    lrows = lora["devices"]["learner GPU"]
    assert lrows["KL reference (LoRA: adapters off, shared)"] == 0
    assert lrows["gradients"] == pytest.approx(4 * 161_480_704 / GIB)
    assert lrows["weights"] == pytest.approx((2 * lora["params"] + 4 * 161_480_704) / GIB)


def test_largest_micro_batch_is_the_edge_of_fitting():
    p = PlanInput("Qwen/Qwen2.5-3B-Instruct", gradient_checkpointing=True, max_prompt_len=2048)
    best = compute_plan(p)["max_micro_batch_that_fits"]
    assert best >= 1
    from dataclasses import replace

    assert all(compute_plan(replace(p, micro_batch_size=best))["fits"].values())
    assert not compute_plan(replace(p, micro_batch_size=best + 1))["fits"]["learner GPU"]


def test_colocated_vllm_shares_one_card():
    p = PlanInput("Qwen/Qwen3-1.7B", micro_batch_size=2, gradient_checkpointing=True, num_env_runners=1,
                  num_gpus_per_learner=0.5, num_gpus_per_env_runner=0.5, generation_backend="vllm",
                  gpu_memory_utilization=0.5)
    plan = compute_plan(p)
    (name, rows), = plan["devices"].items()
    assert "shared" in name and rows["sampler: vLLM share (gpu_memory_utilization)"] == pytest.approx(40.0)


def test_cli_prints_every_recipe_and_rejects_unknown_models(capsys):
    recipes = sorted(str(p) for p in (REPO / "tuned_examples").glob("*_gpu.py"))
    assert main(recipes) == 0
    out = capsys.readouterr().out
    assert out.count("Memory plan:") == len(recipes) and "DOES NOT FIT" not in out
    assert "LoRA r=64 on 7 modules: 161.5M trainable" in out
    assert main(["--model", "no/such-model-here"]) == 2
    assert "model='no/such-model-here'" in capsys.readouterr().err


def test_format_plan_says_when_it_does_not_fit():
    text = format_plan(compute_plan(PlanInput("Qwen/Qwen2.5-7B-Instruct", micro_batch_size=8)))
    assert "DOES NOT FIT" in text and "full fine-tuning" in text


def test_opid_train_plan_prints_and_exits_before_ray_starts(capsys):
    import ray

    from opid_rllib.cli.train import main as train_main

    if ray.is_initialized():  # a session left by an earlier in-process test would make the check vacuous
        ray.shutdown()
    rc = train_main(["--model", "Qwen/Qwen2.5-7B-Instruct", "--plan"])
    out = capsys.readouterr().out
    assert rc == 1 and "Memory plan: Qwen/Qwen2.5-7B-Instruct (7.62B params, full fine-tuning)" in out
    assert "DOES NOT FIT" in out and not ray.is_initialized()
    assert train_main(["--model", "tiny", "--plan"]) == 0


@pytest.mark.slow  # a subprocess that imports torch/Ray: seconds each
def test_recipe_script_plan_reads_its_lora():
    import os
    import subprocess

    # as a user runs it: from the repository root, which is what finds tuned_examples._reference_scale
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-m", "tuned_examples.webshop_opid_qwen2_5_7b_lora_gpu", "--plan"],
                       capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "LoRA r=64 on 7 modules" in r.stdout and "fits" in r.stdout


def test_sharded_learners_divide_the_state_and_add_what_they_gather():
    """sharding="fsdp" over 8 learners: masters, grads and AdamW state / 8; the gathered blocks and the whole
    model gathered for the re-score on top; the same activations and KL reference."""
    from dataclasses import replace

    p = PlanInput("Qwen/Qwen2.5-7B-Instruct", micro_batch_size=1, gradient_checkpointing=True, num_learners=8)
    whole = compute_plan(p)
    sharded = compute_plan(replace(p, sharding="fsdp"))
    n = whole["params"] / GIB
    rows, wrows = sharded["devices"]["learner GPU"], whole["devices"]["learner GPU"]
    assert rows["weights (fp32 masters, 1/8)"] == pytest.approx(4 * n / 8)
    assert rows["gradients (1/8)"] == pytest.approx(4 * n / 8)
    assert rows["optimizer (AdamW m, v fp32, 1/8)"] == pytest.approx(8 * n / 8)
    counts = param_counts(KNOWN_ARCHS["Qwen/Qwen2.5-7B-Instruct"])
    block = counts["layers"] / 28 / GIB
    assert 2 * 2 * block < rows["gathered blocks (forward/backward)"] < 2 * n / 2  # a few units, not the model
    # the re-score's peak: the whole bf16 model gathered next to the score pass, beyond the training pass's
    assert rows["gathered blocks (forward/backward)"] + rows["activations"] + rows[
        "whole model gathered to re-score (excess)"] >= 2 * n
    assert rows["activations"] == wrows["activations"]
    assert rows["KL reference model (bfloat16)"] == wrows["KL reference model (bfloat16)"]
    assert not whole["fits"]["learner GPU"] and sharded["fits"]["learner GPU"]


def test_opid_train_plans_a_sharded_7b_full_fine_tune_on_8_cards(capsys):
    from opid_rllib.cli.train import main as train_main

    argv = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--dtype", "bfloat16", "--num-learners", "8",
            "--num-gpus-per-learner", "1", "--micro-batch-size", "1", "--plan"]
    assert train_main(argv) == 1  # replicated: 16 B/param on every card
    assert "DOES NOT FIT" in capsys.readouterr().out
    assert train_main([*argv, "--sharding", "fsdp"]) == 0
    out = capsys.readouterr().out
    assert "8 learner(s) x 1.0 GPU sharded (fsdp)" in out and "full fine-tuning" in out and " fits (" in out
