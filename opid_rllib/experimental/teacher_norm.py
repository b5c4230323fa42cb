"""Teacher-term normalisation and clipping (`normalize_teacher_adv`, `clip_teacher_adv`): the reference has both
switches, off in every script, so the paper's term is the raw Delta. On: each Delta is z-scored over its active
tokens in the batch, then clamped to [-c, c] (advantages.combine_advantages), before weighting."""

from __future__ import annotations


class TeacherNormCombine:
    def __init__(self, *args, normalize_teacher_adv: bool = False, clip_teacher_adv: float | None = None, **kw):
        super().__init__(*args, **kw)
        self.normalize, self.clip = bool(normalize_teacher_adv), clip_teacher_adv

    def combine_options(self, t, width, metrics):
        return {**super().combine_options(t, width, metrics), "normalize_teacher": self.normalize,
                "clip_teacher": self.clip}
