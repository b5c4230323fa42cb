"""Teacher samples on real rollouts: y_T ~ pi_old(. | x + skill) added as rows with A = w_T * Delta_T."""

import copy
import re

import numpy as np
import pytest
import ray
import torch

from opid_rllib.advantages import plan_match
from opid_rllib.algorithm import learner_connectors
from opid_rllib.connectors import SAMPLES
from opid_rllib.experimental.teacher_samples import ANCHOR, SAMPLE_DELTA, TeacherSamples
from opid_rllib.generation.hf import HFBackend
from opid_rllib.losses import ppo_token_loss
from opid_rllib.presets import apply_settings
from opid_rllib.prompts import insert_skills, project_action
from tests.algo.helpers import rollouts_and_module, tiny_config

W, W_T = 0.5, 1.0


@pytest.fixture(scope="module")
def setup():
    return rollouts_and_module(episode_skill_adv_weight=W, step_skill_adv_weight=W, teacher_sample_adv_weight=W_T)


def sample_delta(t):
    """Delta_T per row (None on the student's rows); the column exists only while the plug-in is on."""
    return t.extra.get(SAMPLE_DELTA, [None] * len(t))


class _Metrics:
    def __init__(self):
        self.values = {}

    def log_value(self, key, value, **kw):
        self.values["/".join(key)] = value


def run(cfg, episodes, module, seed=0, **over):
    cfg = apply_settings(copy.deepcopy(cfg), **over)
    shared, batch, metrics = {}, {}, _Metrics()
    torch.manual_seed(seed)
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=module, batch=batch, episodes=episodes, shared_data=shared, metrics=metrics)
    return batch["default_policy"], shared[SAMPLES], metrics.values


def test_teacher_rows_follow_their_source_with_delta_t_as_advantage(setup):
    cfg, episodes, module = setup
    out, t, metrics = run(cfg, episodes, module, seed=7)
    n_steps = sum(len(e) for e in episodes)
    teacher = [j for j, d in enumerate(sample_delta(t)) if d is not None]
    assert teacher and len(t) == n_steps + len(teacher) == out["advantages"].shape[0]
    assert metrics["opid/teacher_samples/rows"] == len(teacher)
    assert out["teacher_rows"].tolist() == [float(d is not None) for d in sample_delta(t)]  # the likelihood term's rows
    src = [j - 1 for j in teacher]
    # Each teacher row sits right after the step-skill row it was drawn for, with that row's plain prompt.
    assert all(sample_delta(t)[i] is None and t.use_step[i] for i in src)
    assert sum(t.use_step) == len(teacher)  # rows="step": one teacher row per step-skill row
    for i, j in zip(src, teacher):
        assert (t.prompt[j], t.traj_id[j], t.step_index[j]) == (t.prompt[i], t.traj_id[i], t.step_index[i])
        assert not t.use_step[j] and not t.use_episode[j] and t.outcome_adv[j] == 0
    # The responses are samples of the old policy under the STEP-SKILL prompt: same RNG state, same tokens.
    skill_ids = [t.prompt_step[i] for i in src]  # SkillPrompts' token ids of x + step skill
    assert skill_ids == module.encode_prompts([insert_skills(t.prompt[i], step_skill=t.step_skill[i])
                                               for i in src])[0]
    torch.manual_seed(7)
    gens = HFBackend(model=module.model, tokenizer=module.tokenizer,
                     stop=module.model_config["backend_kwargs"]["stop"]).generate(
        skill_ids, temperature=module.model_config["temperature"], max_new_tokens=cfg.max_new_tokens)
    assert [list(g.token_ids) for g in gens] == [t.response_ids[j] for j in teacher]
    # A_T = w_T * (log pi_old(y_T | x + skill) - log pi_old(y_T | x)), and the ratio starts at 1 (old = student).
    plain_ids, _ = module.encode_prompts([t.prompt[i] for i in src])
    for k, j in enumerate(teacher):
        y = t.response_ids[j]
        lp_teacher = module.score([skill_ids[k]], [y])[0]
        lp_student = module.score([plain_ids[k]], [y])[0]
        r = len(y)
        np.testing.assert_allclose(out["old_logp"][j, :r].numpy(), lp_student, atol=1e-5)
        np.testing.assert_allclose(out["advantages"][j, :r].numpy(), W_T * (lp_teacher - lp_student), atol=1e-4)
        assert np.all(out["advantages"][j, r:].numpy() == 0)
    # The student's own rows keep exactly the advantage they get without teacher samples.
    base, t0, m0 = run(cfg, episodes, module, teacher_sample_adv_weight=0.0)
    own = [j for j in range(len(t)) if sample_delta(t)[j] is None]
    assert len(t0) == n_steps and all(d is None for d in sample_delta(t0)) and "opid/teacher_samples/rows" not in m0
    width = base["advantages"].shape[1]
    np.testing.assert_allclose(out["advantages"][own, :width].numpy(), base["advantages"].numpy(), atol=1e-5)


def test_routed_rows_and_plan_diagnostics(setup):
    cfg, episodes, module = setup
    _, t, metrics = run(cfg, episodes, module, teacher_sample_rows="routed")
    n_steps = sum(len(e) for e in episodes)
    teacher = [j for j, d in enumerate(sample_delta(t)) if d is not None]
    assert len(teacher) + metrics["opid/teacher_samples/empty"] == n_steps  # critical-first routes every row
    # The teacher's action is projected with the runner's prompt family (carried per row from the episode)
    # and compared with the env's expert next action, as the student's is.
    assert set(t.env_name) == {"searchqa"} and len(t.env_name) == len(t)
    texts = [module.tokenizer.decode(t.response_ids[j], skip_special_tokens=True) for j in teacher]
    want = [plan_match(project_action("searchqa", x)[0], [t.expert_action[j]]) for x, j in zip(texts, teacher)]
    np.testing.assert_array_equal(t.on_plan[teacher], want)
    assert metrics["opid/teacher_samples/on_plan_frac"] == pytest.approx(np.mean(want))
    student = np.mean(t.on_plan[[j - 1 for j in teacher]])
    assert metrics["opid/teacher_samples/student_on_plan_frac"] == pytest.approx(student)


def test_one_step_on_teacher_rows_moves_the_student_toward_the_teacher(setup):
    """Where Delta_T > 0 (the teacher prefers its own sample more than the student does), a gradient step of the
    clipped loss on those rows raises log pi(y_T | x): the teacher's choice reaches the plain prompt."""
    cfg, episodes, module = setup
    out, t, _ = run(cfg, episodes, module, seed=11, clip_teacher_adv=None)
    rows = [j for j, d in enumerate(sample_delta(t)) if d is not None and float(np.sum(d)) > 0]
    assert rows
    student = copy.deepcopy(module)
    sub = {k: v[rows] for k, v in out.items()}
    before = (sub["old_logp"] * sub["response_mask"]).sum(1)
    opt = torch.optim.SGD([p for p in student.model.parameters() if p.requires_grad], lr=0.05)
    fwd = student._forward_train(sub)
    loss, _ = ppo_token_loss(fwd["logp"], sub["old_logp"], sub["advantages"], sub["response_mask"], kl_coeff=0.0,
                             entropy_coeff=0.0)
    loss.backward()
    opt.step()
    after = (student._forward_train(sub)["logp"].detach() * sub["response_mask"]).sum(1)
    assert float((after - before).mean()) > 0


def test_bad_rows_setting_names_the_field():
    with pytest.raises(ValueError, match="teacher_sample_rows='all'"):
        TeacherSamples(teacher_sample_adv_weight=1.0, teacher_sample_rows="all", teacher_anchor_coeff=0.0)
    cfg = tiny_config(teacher_sample_adv_weight=-0.1, teacher_sample_rows="all")
    with pytest.raises(ValueError) as e:
        cfg.validate()
    assert "teacher_sample_adv_weight=-0.1" in str(e.value) and "teacher_sample_rows='all'" in str(e.value)


@pytest.mark.parametrize("over, says", [
    ({"teacher_sample_adv_weight": 0.0, "teacher_sample_sft_coeff": 1.0}, "teacher_sample_adv_weight=0 draws none"),
    ({"teacher_sample_sft_coeff": -1.0}, "teacher_sample_sft_coeff=-1.0: must be >= 0"),
    ({"teacher_sample_adv_weight": 0.0, "teacher_anchor_coeff": 0.1}, "teacher_anchor_coeff=0.1: applies to"),
    ({"teacher_anchor_coeff": -1.0}, "teacher_anchor_coeff=-1.0: must be >= 0"),
    ({"analyzer": "none"}, "needs an analyzer"),
    ({"step_skill_adv_weight": 0.0}, "step_skill_adv_weight=0 routes none"),
    ({"step_skill_adv_weight": 0.0, "episode_skill_adv_weight": 0.0, "teacher_sample_rows": "routed"},
     "both skill weights are 0"),
])
def test_settings_that_would_route_no_teacher_sample_are_refused(over, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        tiny_config(**{"teacher_sample_adv_weight": 1.0, **over}).validate()
    if not {"teacher_sample_sft_coeff", "teacher_anchor_coeff"} & set(over):
        tiny_config(**{**over, "teacher_sample_adv_weight": 0.0}).validate()  # off: nothing to refuse


def test_teacher_anchor_rows_carry_the_skill_prompt_and_no_advantage(setup):
    """teacher_anchor_coeff > 0: each teacher row is followed by the same y_T under the skill prompt, old log-probs
    log pi_old(y_T | x + skill), zero advantage and anchor_rows = 1; every other row, and the advantage
    statistics, are what they are without the anchor."""
    cfg, episodes, module = setup
    out, t, metrics = run(cfg, episodes, module, seed=7, teacher_anchor_coeff=0.5)
    base, t0, m0 = run(cfg, episodes, module, seed=7)
    anchor = [j for j in range(len(t)) if t.extra[ANCHOR][j]]
    teacher = [j for j, d in enumerate(sample_delta(t)) if d is not None]
    assert anchor and [j - 1 for j in anchor] == teacher and len(t) == len(t0) + len(anchor)
    assert out["anchor_rows"].tolist() == list(t.extra[ANCHOR]) and "anchor_rows" not in base
    src = [j - 2 for j in anchor]
    skill_ids = [t.prompt_step[i] for i in src]
    for k, j in enumerate(anchor):
        y = t.response_ids[j]
        assert y == t.response_ids[j - 1] and t.prompt_ids[j] == list(skill_ids[k])
        assert t.prompt[j] == insert_skills(t.prompt[src[k]], step_skill=t.step_skill[src[k]])
        np.testing.assert_allclose(out["old_logp"][j, :len(y)].numpy(), module.score([skill_ids[k]], [y])[0], atol=1e-4)
        assert not out["advantages"][j].any() and out["teacher_rows"][j] == 0
    rest = [j for j in range(len(t)) if not t.extra[ANCHOR][j]]
    width = base["advantages"].shape[1]
    np.testing.assert_allclose(out["advantages"][rest, :width].numpy(), base["advantages"].numpy(), atol=1e-5)
    adv_stats = {k: v for k, v in metrics.items() if k.startswith("opid/adv/")}
    assert adv_stats and adv_stats == pytest.approx({k: m0[k] for k in adv_stats})


@pytest.mark.ray
def test_teacher_anchor_trains_through_real_rllib():
    """One OPID iteration with the teacher anchor on (kl_coeff = 0, so pi_ref is loaded for the anchor alone):
    the learner logs the anchor's KL, and the token count is the student's rows' (the anchor rows are not in it)."""
    algo = tiny_config(max_steps=2, max_new_tokens=8, analyzer="hindsight", step_skill_adv_weight=0.5,
                       teacher_sample_adv_weight=1.0, teacher_anchor_coeff=1.0, kl_coeff=0.0,
                       max_prompt_len=2048).build_algo()
    try:
        r = algo.train()
    finally:
        algo.stop()
        ray.shutdown()  # later tests check that bad input fails before Ray starts
    learner, opid = r["learners"]["default_policy"], r["learners"]["opid"]
    assert opid["teacher_samples"]["rows"] > 0
    assert np.isfinite(learner["teacher_anchor_kl"]) and learner["teacher_anchor_kl"] >= 0
    assert "kl_ref" not in learner


def test_learner_reports_kl_ref_per_token_of_the_policys_own_rows():
    """The learner's kl_ref is the k3 KL to pi_ref per token of the rows the policy sampled, not per token of the
    batch: teacher rows neither add to it nor dilute it (they would, with y_T drawn from the skill prompt)."""
    from tests.algo.test_mixed_precision import _batch, _learner

    learner = _learner(kl_coeff=0.01, minibatch_size=None, teacher_sample_adv_weight=1.0)
    module = learner.module["default_policy"].unwrapped()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a reference that differs from the policy, so that k3 > 0
        for p in learner._ref_model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.05)
    batch = _batch(module, n=4)
    batch["teacher_rows"] = torch.tensor([0.0, 1.0, 0.0, 1.0])
    with torch.no_grad():
        logp, ref = module._forward_train(batch)["logp"], learner._ref_logp(batch)
    k3 = (torch.exp(ref - logp) - (ref - logp) - 1.0) * batch["response_mask"]
    own = batch["teacher_rows"] == 0
    want = float(k3[own].sum() / batch["response_mask"][own].sum())
    learner._uncompiled_update({"default_policy": batch})  # one minibatch: the stats are those before its step
    got = learner.metrics.peek(("default_policy", "kl_ref"))
    assert got == pytest.approx(want, rel=1e-4)
    assert got != pytest.approx(float(k3.sum() / batch["response_mask"].sum()), rel=1e-2)
