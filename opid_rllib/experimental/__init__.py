"""Research terms that are not in the paper, each a plug-in with one hook, absent from the pipeline when off
(as TRL keeps such features in trl.experimental). `OPIDConfig.experimental(...)` is their only door
(settings.EXPERIMENTAL_SETTINGS names each with its study).

    plug-in          switched on by                                   hooks into
    teacher_samples  teacher_sample_adv_weight > 0 (+ teacher_sample_  a connector before CombineAdvantages,
                     rows, teacher_sample_sft_coeff, teacher_anchor_   CombineAdvantages (A_T, row kinds), the
                     coeff)                                            loss (SFT and anchor terms), pi_ref
    opsd             opsd_loss_coeff > 0 or skill_adv_in_advantage     CombineAdvantages (Delta out of A, to the
                     False                                            batch), the loss (-c Delta log pi)
    teacher_norm     normalize_teacher_adv or clip_teacher_adv        CombineAdvantages (combine_advantages' options)
    controls         shuffle_skills or content_free_skills            OPID.training_step, before the update
    failed_only      failed_only                                      the env runner: which trajectories to analyse
    hindsight        analyzer_config's on_plan_step_skills,           the hindsight analyzer (its constructor)
                     quote_sampled (set with experimental(hindsight_options=...))

`plugins(cfg)` is what the algorithm asks; each entry says what it adds (None: nothing there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Plugin:
    name: str
    combine_settings: tuple[str, ...] = ()                   # OPIDConfig settings its combine_mixin takes
    connector: Optional[Callable[[Any], Any]] = None         # cfg -> a learner connector before CombineAdvantages
    combine_mixin: Optional[type] = None                     # mixed into CombineAdvantages, built with its settings
    loss_terms: Optional[Callable[..., Any]] = None          # (cfg, logp, mask, batch, ref_logp, stats) -> sum
    needs_ref: Callable[[Any], bool] = field(default=lambda cfg: False)  # scores pi_ref even at kl_coeff 0


def plugins(cfg) -> list[Plugin]:
    """The plug-ins `cfg` switches on, in pipeline order (none for the paper's OPID and its baselines)."""
    on = []
    if cfg.teacher_sample_adv_weight > 0:
        from opid_rllib.experimental import teacher_samples as ts

        on.append(Plugin("teacher_samples", ("teacher_sample_adv_weight",), connector=lambda c: ts.TeacherSamples(
                             teacher_sample_adv_weight=c.teacher_sample_adv_weight,
                             teacher_sample_rows=c.teacher_sample_rows, teacher_anchor_coeff=c.teacher_anchor_coeff),
                         combine_mixin=ts.TeacherSampleCombine, loss_terms=ts.loss_terms,
                         needs_ref=lambda c: c.teacher_anchor_coeff > 0))
    if cfg.opsd_loss_coeff > 0 or not cfg.skill_adv_in_advantage:
        from opid_rllib.experimental import opsd

        on.append(Plugin("opsd", ("skill_adv_in_advantage",), combine_mixin=opsd.OPSDCombine,
                         loss_terms=opsd.loss_terms))
    if cfg.normalize_teacher_adv or cfg.clip_teacher_adv is not None:
        from opid_rllib.experimental.teacher_norm import TeacherNormCombine

        on.append(Plugin("teacher_norm", ("normalize_teacher_adv", "clip_teacher_adv"),
                         combine_mixin=TeacherNormCombine))
    return on
