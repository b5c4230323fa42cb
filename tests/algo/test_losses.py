"""The paper's loss (ppo_token_loss) on hand-computed numbers: clip, dual clip, k3 KL, entropy; it has no parameter for
a research term (tests/algo/test_experimental.py covers those)."""

import math

import pytest
import torch

from opid_rllib.losses import ppo_token_loss

# Five tokens of one response; the last is padding (mask 0) and must not count.
RATIO = [1.5, 0.5, 5.0, 1.0, 7.0]
ADV = [1.0, -1.0, -1.0, 2.0, 9.0]
MASK = [1.0, 1.0, 1.0, 1.0, 0.0]
OLD = [-1.0, -2.0, -3.0, -0.5, -1.0]
LOGP = [o + math.log(r) for o, r in zip(OLD, RATIO)]
ENT = [0.5, 1.0, 1.5, 2.0, 9.0]
REF = [-1.2, -2.5, -1.0, -0.5, -1.0]


def t(x):
    return torch.tensor([x], dtype=torch.float64)


def test_clip_and_dual_clip_by_hand():
    loss, stats = ppo_token_loss(t(LOGP), t(OLD), t(ADV), t(MASK), clip_ratio_low=0.2, clip_ratio_high=0.2, dual_clip_c=3.0,
                                 kl_coeff=0.0, entropy_coeff=0.0)
    # token 1: A=+1, r=1.5 -> max(-1.5, -1.2) = -1.2            (clipped at 1 + 0.2)
    # token 2: A=-1, r=0.5 -> max(0.5, 0.8)  = 0.8              (clipped at 1 - 0.2)
    # token 3: A=-1, r=5   -> max(5, 1.2) = 5, dual clip -> min(5, 3 * 1) = 3
    # token 4: A=+2, r=1   -> -2                                (no clip)
    want = [-1.2, 0.8, 3.0, -2.0]
    assert loss.item() == pytest.approx(sum(want))
    assert stats["policy_loss"].item() == pytest.approx(sum(want))
    assert stats["clip_frac"].item() == pytest.approx(2.0)  # tokens 1 and 2 (token 3 is dual-clipped only)
    # approx KL to pi_old: 0.5 * (log r)^2 summed over the 4 real tokens.
    assert stats["approx_kl_old"].item() == pytest.approx(sum(0.5 * math.log(r) ** 2 for r in RATIO[:4]))


def test_no_dual_clip_keeps_the_large_loss():
    loss, _ = ppo_token_loss(t(LOGP), t(OLD), t(ADV), t(MASK), dual_clip_c=None, kl_coeff=0.0, entropy_coeff=0.0)
    assert loss.item() == pytest.approx(-1.2 + 0.8 + 5.0 - 2.0)


def test_entropy_bonus_and_k3_kl_by_hand():
    beta_h, beta_kl = 0.01, 0.1
    loss, stats = ppo_token_loss(t(LOGP), t(OLD), t(ADV), t(MASK), entropy=t(ENT), ref_logp=t(REF),
                                 kl_coeff=beta_kl, entropy_coeff=beta_h)
    pg = [-1.2, 0.8, 3.0, -2.0]
    # k3 = exp(ref - logp) - (ref - logp) - 1, per real token.
    k3 = [math.exp(r - lp) - (r - lp) - 1 for r, lp in zip(REF[:4], LOGP[:4])]
    want = sum(p - beta_h * h + beta_kl * k for p, h, k in zip(pg, ENT[:4], k3))
    assert loss.item() == pytest.approx(want)
    assert stats["kl_ref"].item() == pytest.approx(sum(k3))
    assert stats["entropy"].item() == pytest.approx(sum(ENT[:4]))


def test_k3_kl_is_clamped_at_10():
    # ref - logp = 5: exp(5) - 5 - 1 = 142.4 -> clamped to 10.
    logp, ref = [-6.0], [-1.0]
    loss, stats = ppo_token_loss(t(logp), t(logp), t([0.0]), t([1.0]), ref_logp=t(ref), kl_coeff=1.0,
                                 entropy_coeff=0.0)
    assert stats["kl_ref"].item() == pytest.approx(10.0)
    assert loss.item() == pytest.approx(10.0)


def test_nonfinite_values_on_padding_do_not_reach_the_loss():
    """The mask is applied with where, not a product: -inf * 0 would be NaN."""
    old = t([OLD[0], OLD[1], OLD[2], OLD[3], float("-inf")])   # padding token's old log-prob is -inf
    logp = t(LOGP).requires_grad_()
    loss, _ = ppo_token_loss(logp, old, t(ADV), t(MASK), dual_clip_c=None, kl_coeff=0.0, entropy_coeff=0.0)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all() and logp.grad[0, 4] == 0


def test_entropy_and_logprobs_stay_finite_with_a_minus_inf_logit():
    """A vocabulary entry whose logit is -inf (masked, unused, an fp16 overflow) made every token's entropy
    0 * -inf = NaN, and a padding position that gathers it -inf * 0 = NaN. Real tiny model, its lm head's output
    for one token id set to -inf by a forward hook."""
    from opid_rllib.models import load_model, resolve_model
    from opid_rllib.token_logprobs import response_logprobs

    model = load_model(resolve_model("tiny"))
    banned = 7
    model.lm_head.register_forward_hook(lambda mod, inp, out: out.index_fill(-1, torch.tensor([banned]),
                                                                            float("-inf")))
    prompts = torch.tensor([[5, 6, 9], [0, 5, 6]])
    responses = torch.tensor([[11, 12, 13], [11, banned, banned]])   # row 1: one token, then padding = banned id
    logp, ent = response_logprobs(model, prompts, torch.tensor([3, 2]), responses, torch.tensor([3, 1]),
                                  with_entropy=True)
    assert torch.isfinite(logp).all() and torch.isfinite(ent).all()
    assert (logp[1, 1:] == 0).all() and (ent[1, 1:] == 0).all() and (ent[:, 0] > 0).all()


def test_the_paper_loss_has_no_parameter_for_a_research_term():
    import inspect

    from opid_rllib.settings import EXPERIMENTAL_SETTINGS

    params = set(inspect.signature(ppo_token_loss).parameters)
    # is_weight: a pipelined batch's truncated importance weight (pipeline.py), off-policy correction, not research
    assert params == {"logp", "old_logp", "adv", "mask", "entropy", "ref_logp", "clip_ratio_low", "clip_ratio_high",
                      "dual_clip_c", "kl_coeff", "entropy_coeff", "is_weight"}
    assert not params & set(EXPERIMENTAL_SETTINGS)
