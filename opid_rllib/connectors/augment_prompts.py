"""Skill-augmented prompts: the same step prompt with the routed skill in its slot."""

from __future__ import annotations

from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.connectors.common import SAMPLES
from opid_rllib.prompts import insert_skills


class BuildSkillPrompts(ConnectorV2):
    """One skill per augmented prompt (episode after the task line, step before the final
    instruction), as the reference does; additive routing scores the two prompts separately."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = shared_data[SAMPLES]
        t["prompt_ep"] = [insert_skills(p, episode_skill=s) if use else None
                          for p, s, use in zip(t["prompt"], t["episode_skill"], t["use_episode"])]
        t["prompt_step"] = [insert_skills(p, step_skill=s) if use else None
                            for p, s, use in zip(t["prompt"], t["step_skill"], t["use_step"])]
        return batch
