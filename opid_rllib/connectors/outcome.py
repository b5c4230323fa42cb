"""OutcomeAdvantage, the first learner connector: the GRPO outcome advantage A_out per step-sample.

As RLlib's PPO computes GAE in a learner connector, OPID computes its group-relative advantage here. Group
statistics need every episode of a group, and the algorithm hands each learner whole groups
(groups.shard_by_group), so the learner's episodes are enough.

    S_i = R - penalty * (1 - valid_i)        (advantages.step_scores; valid_i: `step_validity`)
    A_out_i = (S_i - mu_g) / (sigma_g + eps) over ALL step-samples of group g (advantages.outcome_advantage,
              the reference's compute_mean_std_cross_steps=True)
"""

from __future__ import annotations

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.advantages import outcome_advantage, step_scores

OUTCOME_ADV = "opid_outcome_adv"  # shared_data key: one float32 array of A_out per episode, in episode order


def step_validity(ep, source: str = "format") -> np.ndarray:
    """valid_i per step: the response's format ("format", the reference's is_action_valid); with "env" also
    the env's acceptance of the command (info["action_valid"] after the step; ALFWorld's "Nothing happens.");
    with "repeat" only a rejected command that repeats the previous step's (a no-op loop), so a failed first
    'take' is not penalised: "env" taught the tiny policy never to take."""
    valid = np.asarray(ep.get_extra_model_outputs("format_valid"), bool)
    if source in ("env", "repeat"):
        after = ep.get_infos()[1:]  # infos[0] is the reset's
        rejected = ~np.array([bool(i.get("action_valid", True)) for i in after], bool)[: len(valid)]
        if source == "repeat":
            actions = [str(a) for a in ep.get_actions()][: len(valid)]
            rejected &= np.array([i > 0 and a == actions[i - 1] for i, a in enumerate(actions)], bool)
        valid = valid & ~rejected
    return valid


def outcome_advantages(episodes, invalid_action_penalty: float, mode: str, source: str = "format") -> list:
    """A_out of every step of every episode (whole groups), one float32 array per episode."""
    if not episodes:
        return []
    scores = [step_scores(float(sum(ep.get_rewards())), step_validity(ep, source), invalid_action_penalty)
              for ep in episodes]
    groups = [ep.custom_data["opid"]["group_id"] for ep in episodes for _ in range(len(ep))]
    adv = outcome_advantage(np.concatenate(scores), groups, mode).astype(np.float32)
    return np.split(adv, np.cumsum([len(ep) for ep in episodes])[:-1])


class OutcomeAdvantage(ConnectorV2):
    def __init__(self, *args, invalid_action_penalty: float, outcome_adv_norm: str, invalid_action_source: str,
                 **kw):
        super().__init__(*args, **kw)
        self.penalty, self.mode, self.source = float(invalid_action_penalty), outcome_adv_norm, invalid_action_source

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        shared_data[OUTCOME_ADV] = outcome_advantages(episodes, self.penalty, self.mode, self.source)
        return batch
