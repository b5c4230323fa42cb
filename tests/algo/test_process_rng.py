"""opid_rllib/process_rng.py: a process's generators survive a msgpack round trip (RLlib's other checkpoint format)
and set back, draw for draw."""

import random

import msgpack
import numpy as np
import torch

from opid_rllib import process_rng


def _draws():
    return torch.rand(4).tolist(), np.random.rand(4).tolist(), np.random.randn(1).tolist(), random.random()


def test_captured_generators_survive_msgpack_and_draw_the_same_again():
    torch.manual_seed(1)
    np.random.seed(1)
    random.seed(1)
    np.random.randn(1)  # numpy then holds a cached Gaussian, part of its state
    saved = msgpack.unpackb(msgpack.packb(process_rng.capture()))
    expected = _draws()
    assert _draws() != expected
    process_rng.restore(saved)
    assert _draws() == expected
    process_rng.restore(None)  # an older checkpoint's missing entry leaves the generators alone
    assert _draws() != expected
