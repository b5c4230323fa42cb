"""Sharded learners (sharding="fsdp", FSDP2 over gloo): two real learner processes take the same update as one
learner and as today's all-reduce, re-score on sharded weights, hold half the bytes each and round-trip a
checkpoint bit-exactly; and the combinations it refuses.

Tolerance (fp32): loss and gradient norm within 1e-6 relative; gradients within 1e-7 absolute (the largest is
~4e-2); weights after the AdamW step within 5e-6 absolute, 5 % of one step at lr 1e-4 (Adam's first step moves a
weight by ~lr * sign(g), so a weight whose gradient is near Adam's eps may carry the summation order's rounding).
"""

import pytest
import torch
import torch.multiprocessing as mp

from opid_rllib.algorithm import OPIDConfig
from tests.algo.sharded_ranks import RANK_ROWS, free_port, run_rank, unsharded_reference


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    mp.spawn(run_rank, args=(free_port(), str(out)), nprocs=2, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


@pytest.fixture(scope="module")
def single():
    return unsharded_reference()


@pytest.mark.parametrize("path", ["fsdp", "allreduce"])
def test_two_learners_take_the_one_learner_step(ranks, single, path):
    """Unequal rows, tokens and micro-batch counts per rank: the token mean is over every rank's tokens. The sharded
    learners checkpoint their blocks (recomputed in backward, as the GPU recipes run), the others do not."""
    one = single["update"]
    a, b = single["rank_tokens"]
    assert abs(a - b) > 0.2 * (a + b) / 2  # a per-rank token mean would give another step
    for rank in ranks:
        got = rank[path]
        assert got["loss"] == pytest.approx(one["loss"], rel=1e-6)
        assert got["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-6)
        assert one["grad_norm"] > 1.0  # clipped at grad_clip=1: the whole model's norm decides the scale
        for name, g in one["grads"].items():
            torch.testing.assert_close(got["grads"][name], g, atol=1e-7, rtol=0)
        moved = max(float((w - single["initial"][k]).abs().max()) for k, w in one["weights"].items())
        assert moved > 20 * 5e-6  # the step is far larger than the tolerance
        assert set(got["weights"]) == set(one["weights"])
        for name, w in one["weights"].items():
            torch.testing.assert_close(got["weights"][name], w, atol=5e-6, rtol=0)


def test_rescore_on_sharded_weights_equals_the_whole_model(ranks, single):
    """Each rank scores its own rows (3 and 5 at 2 per pass: unequal numbers of forwards) on gathered weights."""
    got = ranks[0]["rescore"] + ranks[1]["rescore"]
    assert len(ranks[0]["rescore"]) == len(RANK_ROWS[0]) != len(ranks[1]["rescore"])
    for g, want in zip(got, single["scores"], strict=True):
        torch.testing.assert_close(torch.as_tensor(g), torch.as_tensor(want), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["params", "grads", "optimizer"])
def test_each_rank_holds_half_the_bytes(ranks, single, kind):
    whole = single["bytes"][kind]
    held = [r["fsdp_bytes"][kind] for r in ranks]
    assert all(abs(h / (whole / 2) - 1) <= 0.10 for h in held), (held, whole)
    assert sum(held) >= whole  # nothing left out (padding may add a row)


def test_sharded_checkpoint_round_trip_is_bit_exact(ranks):
    """Saved after one update (rank 0 gathers weights and AdamW state), stepped on, restored into the shards:
    the next update repeats bit for bit."""
    for r in ranks:
        assert r["resume"] == {"moved": True, "equal": True}


def test_sharded_checkpoint_exports_a_folder_transformers_loads(ranks, tmp_path):
    from transformers import AutoModelForCausalLM

    from envs.base import text_space
    from opid_rllib.export import save_policy
    from opid_rllib.rl_module import LLMRLModule
    from tests.algo.helpers import tiny_config

    saved = ranks[0]["saved_module"]
    module = LLMRLModule(observation_space=text_space(), action_space=text_space(),
                         model_config=tiny_config().model_config)
    module.set_state(saved)
    model = AutoModelForCausalLM.from_pretrained(save_policy(module, tmp_path / "hf"))
    for name, w in model.state_dict().items():
        want = saved.get("model." + name, saved["model.model.embed_tokens.weight"] if "lm_head" in name else None)
        torch.testing.assert_close(w, want, atol=0, rtol=0)


@pytest.mark.parametrize("settings, says", [
    (dict(num_learners=1), "sharding='fsdp' needs num_learners >= 2 (got 1)"),
    (dict(num_learners=2, lora={"r": 4, "alpha": 8}), "sharding='fsdp' with lora: not supported"),
    (dict(num_learners=2, grad_clip_by="norm"), "grad_clip_by='norm': a per-tensor norm would be each shard's"),
    (dict(num_learners=2, sharding="zero3"), "sharding='zero3': must be one of ('none', 'fsdp')"),
])
def test_unsupported_sharding_is_one_line_before_ray(settings, says):
    import ray

    settings = {"sharding": "fsdp", **settings}
    cfg = OPIDConfig().llm(sharding=settings.pop("sharding"), lora=settings.pop("lora", None))
    cfg.learners(num_learners=settings.pop("num_learners"))
    cfg.training(**settings)
    with pytest.raises(ValueError) as e:
        cfg.validate()
    lines = str(e.value).splitlines()[1:]
    assert len(lines) == 1 and says in lines[0], str(e.value)
    assert not ray.is_initialized()
