"""The oracle's step skill: the hindsight analyzer's sentence for a step the policy has just sampled.

Why its own module: it is what the skill-headroom evaluation (`opid-eval --skills oracle`), the skill-literate warm
start's demos and studies/skill_copy_probe.py insert, one wording shared with `HindsightAnalyzer` but used online, one
step at a time, rather than on a finished trajectory.
"""

from __future__ import annotations

from typing import Sequence

from opid_rllib.analyzer.base import StepRecord, TrajectoryRecord
from opid_rllib.analyzer.hindsight import HindsightAnalyzer, _keep_sentence, _step_facts


def oracle_step_skill(env_name: str, step: StepRecord, previous: Sequence[StepRecord] = (),
                      quote_sampled: bool = True) -> str | None:
    """The step skill naming the expert's next action, in the hindsight analyzer's own words, for a
    step the policy has just sampled (`step.action`) but not yet played: skill-headroom evaluation.

    Off the plan (or malformed) it is exactly the sentence `HindsightAnalyzer` writes for such a step
    ("At this point, X instead of 'Y'." / the format rule naming X); on the plan, where the analyzer
    writes nothing, the same sentence without the contrast ("At this point, X."). None without a plan.
    quote_sampled: as `HindsightAnalyzer`'s (False: off the plan too, "At this point, X.").
    """
    if not step.expert_actions:
        return None
    steps = [*previous, step]
    traj = TrajectoryRecord(traj_id="oracle", group_id="oracle", task_id="", task="", task_type="",
                            env_name=env_name, steps=steps)
    found = HindsightAnalyzer(quote_sampled=quote_sampled)._step_skill(traj, _step_facts(traj)[-1])
    if found is not None and found[0] in ("plan", "format"):
        return found[1]
    return _keep_sentence(step.expert_actions[0])
