"""PPO minibatches (the reference's ppo_mini_batch_size): one optimizer step per `minibatch_size` step-samples,
sequential split, old log-probs fixed for the whole pass. Real tiny model and real OPIDTorchLearner."""

import pytest
import torch

from envs.base import text_space
from opid_rllib.learner import minibatch_count
from tests.algo.test_mixed_precision import _batch
from tests.algo.helpers import tiny_config


def _learner(**kw):
    return tiny_config(lr=1e-3, **kw).build_learner(spaces={"default_policy": (text_space(), text_space())})


def _weights(learner):
    return {k: p.detach().clone() for k, p in learner.module["default_policy"].unwrapped().model.named_parameters()}


def _adam_steps(learner) -> set:
    return {int(s["step"]) for opt in learner._optimizer_parameters for s in opt.state.values()}


def test_minibatch_count():
    assert minibatch_count(240, 64) == 4 and minibatch_count(256, 64) == 4 and minibatch_count(10, None) == 1
    assert minibatch_count(0, 64) == 1 and minibatch_count(3, 64) == 1


def test_minibatches_equal_sequential_updates_on_their_rows():
    """minibatch_size=2 on 4 rows == one update on rows 0-1, then one on rows 2-3 (same old log-probs)."""
    a = _learner(minibatch_size=2)
    b = _learner()  # one step per update call
    batch = _batch(a.module["default_policy"].unwrapped(), n=4)
    for k, v in _weights(a).items():
        assert torch.equal(v, _weights(b)[k])  # same start
    a._uncompiled_update({"default_policy": batch})
    assert _adam_steps(a) == {2}
    assert a.metrics.peek(("default_policy", "num_optimizer_steps")) == 2
    for rows in (slice(0, 2), slice(2, 4)):
        b._uncompiled_update({"default_policy": {k: v[rows] for k, v in batch.items()}})
    wa, wb = _weights(a), _weights(b)
    assert all(torch.allclose(wa[k], wb[k], rtol=0, atol=1e-7) for k in wa)


def test_minibatch_of_the_whole_batch_is_one_step():
    a, b = _learner(minibatch_size=64), _learner()
    batch = _batch(a.module["default_policy"].unwrapped(), n=4)
    a._uncompiled_update({"default_policy": batch})
    b._uncompiled_update({"default_policy": batch})
    assert _adam_steps(a) == _adam_steps(b) == {1}
    wa, wb = _weights(a), _weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_teacher_sample_likelihood_reaches_the_learner():
    """teacher_sample_sft_coeff > 0: the learner adds -c_T * log pi on the batch's teacher rows, so it logs the
    term and the teacher row's log-prob rises even with zero advantage (no PPO gradient at all)."""
    kw = dict(analyzer="hindsight", step_skill_adv_weight=0.5, teacher_sample_adv_weight=1.0, kl_coeff=0.0,
              entropy_coeff=0.0, weight_decay=0.0)
    on, off = _learner(teacher_sample_sft_coeff=1.0, **kw), _learner(**kw)
    module = on.module["default_policy"].unwrapped()
    batch = _batch(module, n=4)
    batch["advantages"] = torch.zeros_like(batch["advantages"])
    batch["teacher_rows"] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    before = _weights(off)
    on._uncompiled_update({"default_policy": batch})
    off._uncompiled_update({"default_policy": batch})
    assert on.metrics.peek(("default_policy", "teacher_sft_nll")) > 0
    assert all(torch.equal(v, before[k]) for k, v in _weights(off).items())  # A = 0 and no c_T: nothing moves
    after = on.module["default_policy"].unwrapped()._forward_train(batch)["logp"].detach()
    gain = ((after - batch["old_logp"]) * batch["response_mask"]).sum(1)
    assert float(gain[1]) > 0 and float(gain[1]) > float(gain[[0, 2, 3]].max())


def test_teacher_anchor_rows_are_left_out_of_the_token_count():
    """teacher_anchor_coeff > 0: the learner scores pi_ref even with kl_coeff = 0, and divides by the student's
    tokens only. At the first step pi_theta = pi_ref, so an anchor row adds no loss: the loss equals that of the
    batch without it, where counting its tokens would have shrunk it."""
    kw = dict(analyzer="hindsight", step_skill_adv_weight=0.5, teacher_sample_adv_weight=1.0, kl_coeff=0.0)
    # a's micro-batches of one row: those without an anchor row skip pi_ref's forward (kl_coeff = 0)
    a, b = _learner(teacher_anchor_coeff=1.0, micro_batch_size=1, **kw), _learner(**kw)
    assert a._ref_model is not None and b._ref_model is None
    batch = _batch(a.module["default_policy"].unwrapped(), n=4)
    with_anchor = {**batch, "anchor_rows": torch.tensor([0.0, 0.0, 0.0, 1.0]),
                   "advantages": batch["advantages"].clone()}
    with_anchor["advantages"][3] = 0.0  # as CombineAdvantages leaves it
    _, loss_a, _ = a._uncompiled_update({"default_policy": with_anchor})
    _, loss_b, _ = b._uncompiled_update({"default_policy": {k: v[:3] for k, v in batch.items()}})
    assert float(loss_a["default_policy"]) == pytest.approx(float(loss_b["default_policy"]), rel=1e-5)
    assert a.metrics.peek(("default_policy", "teacher_anchor_kl")) == pytest.approx(0.0, abs=1e-5)
    assert a.metrics.peek(("default_policy", "num_response_tokens")) == float(batch["response_mask"][:3].sum())
    c = _learner(teacher_anchor_coeff=1.0, minibatch_size=3, **kw)  # 3 student rows: one step, as without the anchor
    c._uncompiled_update({"default_policy": with_anchor})
    assert c.metrics.peek(("default_policy", "num_optimizer_steps")) == 1


def test_minibatches_split_the_student_rows_and_keep_each_anchor_with_its_teacher_row():
    """k counts the student's rows; splitting all rows into k made minibatches of anchor rows alone (their KL then
    summed over a student-token count clamped to 1, and that optimizer step trained nothing but the anchor)."""
    from opid_rllib.learner import minibatch_rows

    anchor = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0])   # TeacherSamples: each anchor after its teacher row
    for k in range(1, 8):
        parts = minibatch_rows(7, k, anchor)
        assert len(parts) == k and torch.equal(torch.cat(parts), torch.arange(7))
        for p in parts:
            assert len(p) == 0 or (anchor[p] == 0).any()            # never anchor rows alone
            if len(p) and anchor[p[0]] == 1:
                raise AssertionError(f"k={k}: anchor row {int(p[0])} split from its teacher row")
    assert [p.tolist() for p in minibatch_rows(7, 3, anchor)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [p.tolist() for p in minibatch_rows(4, 2)] == [[0, 1], [2, 3]]   # no anchor: as before
