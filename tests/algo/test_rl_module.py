"""The LLM RLModule: sampling log-probs == training log-probs, re-scoring == forward_train, bf16 state."""

import pickle

import numpy as np
import pytest
import torch

from opid_rllib.rl_module import pack
from tests.algo.helpers import tiny_config


def _module(dtype="float32", inference_only=False, **kw):
    from envs.base import text_space
    from opid_rllib.rl_module import LLMRLModule

    cfg = tiny_config(dtype=dtype, **kw)
    return LLMRLModule(observation_space=text_space(), action_space=text_space(), inference_only=inference_only,
                       model_config=cfg.model_config)


@pytest.fixture(scope="module")
def module():
    return _module()


PROMPTS = ["Question: who founded Acme?\nNow it's your turn.", "Your task is to: put a mug in shelf."]


def test_sampling_logprobs_match_forward_train(module):
    ids, _ = module.encode_prompts(PROMPTS)
    gens = module.generate(ids, temperature=1.0, max_new_tokens=10, seed=0)
    assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in gens)
    b = {k: torch.as_tensor(v) for k, v in pack(ids, [g.token_ids for g in gens], module.pad_id).items()}
    with torch.no_grad():
        out = module._forward_train(b)
    for i, g in enumerate(gens):
        np.testing.assert_allclose(out["logp"][i, : len(g.token_ids)].numpy(), g.logprobs, atol=1e-4)
    # Beyond each response's length the log-probs are exactly zero (masked).
    assert out["logp"].shape == (2, max(len(g.token_ids) for g in gens))
    assert torch.isfinite(out["entropy"]).all()


def test_rescoring_equals_forward_train_and_depends_on_prompt(module):
    ids, _ = module.encode_prompts(PROMPTS)
    resp = [[5, 6, 7, 8], [9, 10]]
    scored = module.score(ids, resp, micro_batch_size=1)
    b = {k: torch.as_tensor(v) for k, v in pack(ids, resp, module.pad_id).items()}
    with torch.no_grad():
        logp = module._forward_train(b)["logp"]
    for i, r in enumerate(resp):
        np.testing.assert_allclose(scored[i], logp[i, : len(r)].numpy(), atol=1e-5)
    other, _ = module.encode_prompts(["something else entirely " * 3, PROMPTS[1]])
    changed = module.score(other, resp)
    assert not np.allclose(changed[0], scored[0])  # a different prompt changes the scores
    np.testing.assert_allclose(changed[1], scored[1], atol=1e-5)  # batch composition does not


def test_length_sorted_scoring_returns_input_order(module):
    """score() batches length-sorted rows; each result must still land on its own sample."""
    texts = ["short", "a much longer prompt " * 6, "mid length prompt " * 2, "x", "longest of them all " * 9]
    ids, _ = module.encode_prompts(texts)
    resp = [[5, 6, 7], [9], [10, 11, 12, 13, 14], [15, 16], [17, 18, 19, 20]]
    one_by_one = module.score(ids, resp, micro_batch_size=1)
    batched = module.score(ids, resp, micro_batch_size=2)
    for a, b, r in zip(one_by_one, batched, resp):
        assert a.shape == (len(r),)
        np.testing.assert_allclose(b, a, atol=1e-5)


def test_length_sorted_generation_returns_input_order(module):
    """The HF backend generates length-sorted chunks; each generation must come back to its own prompt
    (greedy: equal to generating that prompt alone)."""
    from opid_rllib.generation.hf import HFBackend

    texts = ["a much longer prompt " * 6, "x", "longest of them all " * 9, "mid length prompt " * 2, "short"]
    ids, _ = module.encode_prompts(texts)
    backend = HFBackend(model=module.model, tokenizer=module.tokenizer, max_batch_size=2)
    chunked = backend.generate(ids, temperature=0.0, max_new_tokens=6)
    alone = [backend.generate([p], temperature=0.0, max_new_tokens=6)[0] for p in ids]
    assert [g.token_ids for g in chunked] == [g.token_ids for g in alone]
    for a, b in zip(chunked, alone):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)


def test_prompt_truncation_is_left_and_counted(module):
    module.model_config["max_prompt_len"] = 32
    try:
        ids, cut = module.encode_prompts(["word " * 200, "hi"])
    finally:
        module.model_config["max_prompt_len"] = 512
    assert cut == [True, False] and len(ids[0]) == 32
    full, _ = module.encode_prompts(["word " * 200])
    assert ids[0] == full[0][-32:]  # the END of the prompt (the current step) is kept


def test_bf16_state_round_trip_without_duplicated_tied_weights():
    a, b = _module("bfloat16"), _module("bfloat16", inference_only=True)
    with torch.no_grad():
        for p in a.model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    state = pickle.loads(pickle.dumps(a.get_state(inference_only=True)))  # what Ray ships at weight sync
    assert all(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in state.values())
    assert not any(k.endswith("lm_head.weight") for k in state)  # tied to the embeddings: shipped once
    b.set_state(state)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va.to(vb.dtype), vb)  # a: fp32 masters, b: their bf16 copies
    # lm_head follows the (tied) embedding that was loaded.
    assert torch.equal(b.model.lm_head.weight, a.model.lm_head.weight.to(torch.bfloat16))


def test_set_state_rejects_missing_keys(module):
    state = module.get_state()
    state.pop(next(k for k in state if "layers.0" in k))
    with pytest.raises(ValueError, match="missing keys"):
        module.set_state(state)
