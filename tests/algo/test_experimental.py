"""Research plug-ins (opid_rllib/experimental/): one door (OPIDConfig.experimental), absent from the pipeline when
off, and their loss terms on hand-computed numbers beside the paper's loss."""

import math

import pytest
import torch

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.experimental import plugins
from opid_rllib.learner import loss_sum
from opid_rllib.presets import PRESETS, apply_preset
from opid_rllib.settings import EXPERIMENTAL_SETTINGS

# The paper's loss tests' five tokens of one response (the last is padding and must not count).
from tests.algo.test_losses import ADV, ENT, LOGP, MASK, OLD, REF  # noqa: E402
# One value per research setting, each valid on its own (teacher-sample terms need w_T > 0 to have rows).
RESEARCH = {"teacher_sample_adv_weight": 1.0, "teacher_sample_rows": "routed", "teacher_sample_sft_coeff": 0.5,
            "teacher_anchor_coeff": 0.5, "shuffle_skills": True, "content_free_skills": True,
            "invalid_action_source": "env", "opsd_loss_coeff": 0.01, "skill_adv_in_advantage": False,
            "normalize_teacher_adv": True, "clip_teacher_adv": 2.0, "failed_only": True,
            "hindsight_options": {"quote_sampled": False}}


def t(x):
    return torch.tensor([x], dtype=torch.float64)


def two(x):
    return torch.tensor([x, x], dtype=torch.float64)


def research_loss(logp, old, adv, mask, *, entropy=None, ref_logp=None, kl_coeff=0.0, entropy_coeff=0.0,
                  research=None, **columns):
    """The learner's loss (learner.loss_sum) with the plug-ins `research` switches on, on given batch columns."""
    cfg = OPIDConfig().training(kl_coeff=kl_coeff, entropy_coeff=entropy_coeff).experimental(**(research or {}))
    terms = [p.loss_terms for p in plugins(cfg) if p.loss_terms is not None]
    batch = {"old_logp": old, "advantages": adv, "response_mask": mask, **columns}
    return loss_sum(cfg, terms, batch, {"logp": logp, "entropy": entropy}, ref_logp)


def test_every_research_setting_is_covered_here():
    assert set(RESEARCH) == set(EXPERIMENTAL_SETTINGS)


@pytest.mark.parametrize("builder", ["training", "llm", "analyzer_settings"])
@pytest.mark.parametrize("key", sorted(EXPERIMENTAL_SETTINGS))
def test_each_builder_refuses_a_research_setting_and_experimental_takes_it(builder, key):
    with pytest.raises(TypeError) as e:
        getattr(OPIDConfig(), builder)(**{key: RESEARCH[key]})
    msg = str(e.value)
    assert "\n" not in msg and f"{builder}({key}=...)" in msg and f"experimental({key}=...)" in msg
    cfg = OPIDConfig().experimental(**{key: RESEARCH[key]})
    assert getattr(cfg, key) == RESEARCH[key]


def test_experimental_refuses_a_paper_setting_and_evaluation_a_research_one():
    with pytest.raises(TypeError, match=r"experimental\(kl_coeff=\.\.\.\): not an experimental setting"):
        OPIDConfig().experimental(kl_coeff=0.1)
    with pytest.raises(TypeError, match="unknown"):
        OPIDConfig().experimental(teacher_sampel_adv_weight=1.0)


def test_research_analyzer_switches_go_through_experimental():
    cfg = OPIDConfig().analyzer_settings(analyzer_config={"quote_sampled": False})
    with pytest.raises(ValueError, match=r"quote_sampled is a research switch; set it with OPIDConfig\(\)\.experimental"):
        cfg.validate()
    cfg = apply_preset(OPIDConfig(), "opid", analyzer_config={"on_plan_step_skills": 2})  # recipes' flat dicts
    assert cfg.analyzer_config == {} and cfg.hindsight_options == {"on_plan_step_skills": 2}
    cfg.validate()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_only_switch_plugins_on_through_experimental_settings(name):
    cfg = apply_preset(OPIDConfig(), name)
    research = {k for k in PRESETS[name] if k in EXPERIMENTAL_SETTINGS}
    assert bool(plugins(cfg)) == bool(research & {"opsd_loss_coeff", "skill_adv_in_advantage"})


def test_the_paper_pipeline_builds_no_research_piece_column_or_tensor():
    """OPID as the paper writes it: no plug-in, no piece beyond the paper's five, and (tests/algo/test_connectors.py
    runs it) no research column in the table or tensor in the batch."""
    from opid_rllib.algorithm import learner_connectors
    from opid_rllib.connectors.combine import CombineAdvantages

    for name in ("opid", "grpo", "no_step_skill", "additive", "opsd"):
        cfg = apply_preset(OPIDConfig(), name)
        assert plugins(cfg) == []
        pieces = learner_connectors(cfg)
        assert [type(p).__name__ for p in pieces] == ["OutcomeAdvantage", "EpisodesToStepSamples", "SkillPrompts",
                                                      "RescoreWithOldPolicy", "CombineAdvantages"]
        assert type(pieces[-1]) is CombineAdvantages


def test_kl_ref_diagnostic_leaves_teacher_rows_out_but_the_penalty_does_not():
    """A teacher row's y_T was drawn from the skill prompt, not from pi_theta, so its k3 is no KL estimate: the loss
    keeps its penalty (the trained objective), the kl_ref diagnostic and its token count cover the other rows."""
    logp = torch.tensor([LOGP, LOGP], dtype=torch.float64)
    kw = dict(ref_logp=two(REF), kl_coeff=0.1)
    loss, stats = research_loss(logp, two(OLD), two(ADV), two(MASK), research={"teacher_sample_adv_weight": 1.0},
                                teacher_rows=torch.tensor([0.0, 1.0]), **kw)
    plain, plain_stats = research_loss(logp, two(OLD), two(ADV), two(MASK), **kw)
    k3 = sum((math.exp(r - lp) - (r - lp) - 1) * m for r, lp, m in zip(REF, LOGP, MASK))
    assert loss.item() == pytest.approx(plain.item())
    assert stats["kl_ref"].item() == pytest.approx(k3) and stats["kl_ref_tokens"].item() == sum(MASK)
    assert plain_stats["kl_ref"].item() == pytest.approx(2 * k3) and plain_stats["kl_ref_tokens"].item() == 2 * 4


def test_opsd_term_and_gradient():
    """-c * Delta * log pi_theta: its gradient w.r.t. log pi_theta is -c * Delta on real tokens."""
    delta = [0.3, -0.2, 0.0, 1.0, 5.0]
    logp = t(LOGP).requires_grad_(True)
    loss, _ = research_loss(logp, t(LOGP), t([0.0] * 5), t(MASK), research={"opsd_loss_coeff": 0.5},
                            teacher_delta=t(delta))
    assert loss.item() == pytest.approx(sum(-0.5 * d * lp for d, lp, m in zip(delta, LOGP, MASK) if m))
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-0.5 * d * m for d, m in zip(delta, MASK)])


def test_teacher_sample_likelihood_acts_past_the_clip():
    """-c_T * log pi_theta on teacher rows only: where the clip has zeroed the PPO gradient (A > 0, r > 1 + eps),
    the teacher row still gets -c_T per real token and the student's own row gets nothing."""
    logp = torch.tensor([LOGP, LOGP], dtype=torch.float64, requires_grad=True)
    old, mask = two(OLD), two(MASK)
    adv = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0]] * 2, dtype=torch.float64)  # token 0: r = 1.5, clipped
    rows = torch.tensor([0.0, 1.0], dtype=torch.float64)  # row 1 was sampled by the skill teacher
    on = {"teacher_sample_adv_weight": 1.0, "teacher_sample_sft_coeff": 0.5}
    loss, stats = research_loss(logp, old, adv, mask, research=on, teacher_rows=rows)
    nll = -sum(lp * m for lp, m in zip(LOGP, MASK))
    assert stats["teacher_sft_nll"].item() == pytest.approx(nll)
    assert loss.item() == pytest.approx(2 * -1.2 + 0.5 * nll)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([0.0] * 5)
    assert logp.grad[1].tolist() == pytest.approx([-0.5 * m for m in MASK])
    off, _ = research_loss(logp.detach(), old, adv, mask, research={"teacher_sample_adv_weight": 1.0},
                           teacher_rows=rows)
    assert off.item() == pytest.approx(2 * -1.2)  # c_T = 0 (the default): the plain clipped loss


def test_teacher_anchor_rows_get_only_their_kl_to_the_reference():
    """Anchor rows (x + skill, y_T): no clipped term, entropy or ref KL at kl_coeff, only c_A * k3(ref, logp); the
    student's row keeps exactly its loss and its diagnostics ignore the anchor row."""
    logp = torch.tensor([LOGP, LOGP], dtype=torch.float64, requires_grad=True)
    kw = dict(entropy=two(ENT), ref_logp=two(REF), kl_coeff=0.1, entropy_coeff=0.01)
    on = {"teacher_sample_adv_weight": 1.0, "teacher_anchor_coeff": 0.5}
    cols = dict(teacher_rows=torch.tensor([0.0, 0.0]), anchor_rows=torch.tensor([0.0, 1.0]))
    loss, stats = research_loss(logp, two(OLD), two(ADV), two(MASK), research=on, **cols, **kw)
    alone, alone_stats = research_loss(t(LOGP), t(OLD), t(ADV), t(MASK),
                                       **{k: v[:1] if torch.is_tensor(v) else v for k, v in kw.items()})
    k3 = [math.exp(r - lp) - (r - lp) - 1 for r, lp in zip(REF, LOGP)]
    anchor_kl = sum(k * m for k, m in zip(k3, MASK))
    assert loss.item() == pytest.approx(alone.item() + 0.5 * anchor_kl)
    assert stats["teacher_anchor_kl"].item() == pytest.approx(anchor_kl)
    assert stats["teacher_anchor_tokens"].item() == sum(MASK)
    for k in ("policy_loss", "clip_frac", "approx_kl_old", "entropy", "kl_ref"):
        assert stats[k].item() == pytest.approx(alone_stats[k].item())
    loss.backward()
    # d k3 / d logp = 1 - exp(ref - logp): a token the teacher now finds less likely than the base did
    # (logp < ref) is pushed back up, one it finds more likely is pulled down.
    assert logp.grad[1].tolist() == pytest.approx([0.5 * (1 - math.exp(r - lp)) * m
                                                   for r, lp, m in zip(REF, LOGP, MASK)])
    with pytest.raises(ValueError, match="teacher_anchor_coeff > 0 needs log pi_ref"):
        research_loss(logp, two(OLD), two(ADV), two(MASK), research=on, **cols)


def test_failed_only_analyses_only_the_trajectories_that_did_not_win():
    """experimental(failed_only=True): the reference's option, hooked where the runner hands a finished trajectory to
    the analyzer; off (the paper's scripts) every trajectory is analysed."""
    from types import SimpleNamespace

    from opid_rllib.env_runner import GroupedTextEnvRunner
    from tests.algo.helpers import tiny_config

    def slot(won):
        return {"episode": SimpleNamespace(custom_data={"opid": {"won": won}})}

    for failed_only, want in ((True, [False, True]), (False, [True, True])):
        r = GroupedTextEnvRunner(config=tiny_config().experimental(failed_only=failed_only))
        try:
            assert [r._should_analyze(slot(won)) for won in (True, False)] == want
        finally:
            r.stop()
