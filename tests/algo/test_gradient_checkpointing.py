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
