"""Mixed precision as the GPU recipes run it: fp32 master weights on the learner, bf16 compute,
bf16 copies for the samplers and the KL reference. All on CPU (CPU autocast supports bf16)."""

import pickle

import numpy as np
import pytest
import torch

from envs.base import text_space
from opid_rllib.token_logprobs import pack
from tests.algo.helpers import tiny_config


def _learner(**kw):
    cfg = tiny_config(**kw)
    cfg.grad_clip = None
    return cfg.build_learner(spaces={"default_policy": (text_space(), text_space())})


def _batch(module, n=4, seed=0):
    """A small real batch: encoded prompts, random response tokens, non-zero advantages."""
    g = torch.Generator().manual_seed(seed)
    ids, _ = module.encode_prompts([f"Question {i}: who wrote the book?" * (i + 1) for i in range(n)])
    resp = [torch.randint(10, 1000, (3 + i,), generator=g).tolist() for i in range(n)]
    b = {k: torch.as_tensor(v) for k, v in pack(ids, resp, module.pad_id).items()}
    mask = (torch.arange(b["response_ids"].shape[1])[None] < b["response_len"][:, None]).float()
    old = torch.as_tensor(np.concatenate([np.pad(x, (0, mask.shape[1] - len(x))) for x in module.score(ids, resp)])
                          ).view_as(mask).float()
    adv = torch.where(torch.arange(n)[:, None] % 2 == 0, 1.0, -1.0) * mask
    return {**b, "response_mask": mask, "old_logp": old, "advantages": adv}


def test_lr_1e6_bf16_update_moves_nearly_every_weight():
    """The failure this prevents: bf16 parameters stepped directly round a 1e-6 update away
    (about 1 % of the weights moved). fp32 masters keep every step."""
    learner = _learner(dtype="bfloat16", lr=1e-6, kl_coeff=0.0)
    module = learner.module["default_policy"].unwrapped()
    params = dict(module.model.named_parameters())
    before = {k: p.detach().clone() for k, p in params.items()}
    learner._uncompiled_update({"default_policy": _batch(module)})
    moved = sum(int((p.detach() != before[k]).sum()) for k, p in params.items())
    total = sum(p.numel() for p in params.values())
    assert moved / total >= 0.99, f"only {moved / total:.1%} of the weights moved"
    assert all(p.dtype == torch.float32 for p in params.values())  # master weights


def test_bf16_forward_train_runs_under_autocast():
    """The learner computes in bf16 (the speed of the GPU path), with fp32 weights and fp32 log-probs."""
    learner = _learner(dtype="bfloat16")
    module = learner.module["default_policy"].unwrapped()
    batch = _batch(module, n=2)
    seen = []
    h = module.model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    try:
        out = module._forward_train(batch)
    finally:
        h.remove()
    assert seen == [torch.bfloat16]
    assert out["logp"].dtype == torch.float32 and out["logp"].requires_grad


def test_sampler_gets_bf16_copies_and_checkpoints_keep_fp32():
    from opid_rllib.rl_module import LLMRLModule

    cfg = tiny_config(dtype="bfloat16")
    learner_mod = LLMRLModule(observation_space=text_space(), action_space=text_space(),
                              model_config=cfg.model_config)
    runner_mod = LLMRLModule(observation_space=text_space(), action_space=text_space(), inference_only=True,
                             model_config=cfg.model_config)
    assert next(runner_mod.model.parameters()).dtype == torch.bfloat16
    with torch.no_grad():
        for p in learner_mod.model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    assert all(v.dtype == torch.float32 for v in learner_mod.get_state().values() if v.is_floating_point())
    sync = pickle.loads(pickle.dumps(learner_mod.get_state(inference_only=True)))  # what Ray ships
    assert all(v.dtype == torch.bfloat16 for v in sync.values() if v.is_floating_point())
    runner_mod.set_state(learner_mod.get_state())  # fp32 in: cast on arrival
    for k, v in runner_mod.model.state_dict().items():
        assert v.dtype == torch.bfloat16, k
        torch.testing.assert_close(v, learner_mod.model.state_dict()[k].to(torch.bfloat16), atol=0, rtol=0)


def test_kl_reference_is_frozen_bf16_on_the_learner_device():
    learner = _learner(dtype="bfloat16", kl_coeff=0.01)
    ref = learner._ref_model
    ps = list(ref.parameters())
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in ps)
    assert all(p.device == torch.device(learner._device) for p in ps)
    assert not ref.training


def test_unknown_dtype_is_a_clear_error():
    from opid_rllib.rl_module import LLMRLModule

    cfg = tiny_config()
    mc = dict(cfg.model_config, dtype="fp8")
    with pytest.raises(ValueError, match="dtype"):
        LLMRLModule(observation_space=text_space(), action_space=text_space(), model_config=mc)


def test_bf16_hf_sampling_is_rescored_and_its_gap_logged():
    """The HF sampler in bf16 holds cast weights, the learner fp32 masters under autocast: pi_old is recomputed by
    default (connectors.recompute_old_logp) and the sampler/learner gap is measured and logged, not assumed zero.
    float32 HF sampling keeps the sampler's log-probs (equal within 1e-4, tests/algo/test_connectors.py)."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from opid_rllib.algorithm import learner_connectors
    from opid_rllib.connectors import SAMPLES, recompute_old_logp
    from tests.algo.helpers import rollouts_and_module

    assert not recompute_old_logp(tiny_config()) and recompute_old_logp(tiny_config(dtype="bfloat16"))
    assert not recompute_old_logp(tiny_config(dtype="bfloat16", recompute_old_logp=False))
    cfg, episodes, module = rollouts_and_module(dtype="bfloat16")
    assert module.compute_dtype == torch.bfloat16 and next(module.model.parameters()).dtype == torch.float32
    metrics, shared, batch = MetricsLogger(), {}, {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    t = shared[SAMPLES]
    tokens = sum(len(x) for x in t.sampling_logp)
    assert metrics.peek(("opid", "sampler", "logp_gap_tokens")) == tokens > 0
    gap_mean, gap_max = (metrics.peek(("opid", "sampler", k)) for k in ("logp_gap_mean", "logp_gap_max"))
    assert 0 < gap_mean <= gap_max  # bf16 sampler against the learner's autocast forward: measurably apart
    np.testing.assert_array_equal(batch["default_policy"]["old_logp"][0, :len(t.logp_old[0])].numpy(), t.logp_old[0])
