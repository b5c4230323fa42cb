"""gradient_checkpointing=True recomputes each decoder block in backward (transformers checkpoints only a model in
training mode, and from_pretrained returns one in eval mode), and the update equals the one without it."""

import torch

from tests.algo.sharded_ranks import N_ROWS, batch, learner, train_rows, update


def _update_counting_block_calls(checkpointing: bool):
    lrn = learner(gradient_checkpointing=checkpointing)
    model = lrn.module["default_policy"].unwrapped().model
    block, calls = model.model.layers[0], []
    forward = block.forward

    def counted(*a, **kw):  # forward hooks do not see the recompute; the method does
        calls.append(1)
        return forward(*a, **kw)

    block.forward = counted
    return update(lrn, train_rows(batch(lrn.module["default_policy"].unwrapped()), range(N_ROWS))), len(calls)


def test_checkpointing_recomputes_blocks_and_takes_the_same_step():
    plain, plain_calls = _update_counting_block_calls(False)
    ckpt, ckpt_calls = _update_counting_block_calls(True)
    assert plain_calls > 0 and ckpt_calls == 2 * plain_calls  # each pass's block runs again in backward
    assert ckpt["loss"] == plain["loss"]
    for name, g in plain["grads"].items():
        torch.testing.assert_close(ckpt["grads"][name], g, atol=1e-7, rtol=0)


def test_training_mode_for_checkpointing_keeps_dropout_off():
    """The learner's policy is in training mode only for checkpointing: a model with dropout (here attention and
    residual dropout 0.5, built offline) gives the eval-mode logits after _dropout_off, not a random draw."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from opid_rllib.rl_module import _dropout_off

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32, attn_pdrop=0.5,
                     resid_pdrop=0.5, embd_pdrop=0.5)
    model = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        want = model(ids).logits
        model.train()
        assert not torch.equal(model(ids).logits, want)  # dropout on: the test can fail
        assert _dropout_off(model) > 0
        torch.testing.assert_close(model(ids).logits, want, atol=0, rtol=0)
