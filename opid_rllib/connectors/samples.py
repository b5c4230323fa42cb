"""The step-sample table: one row per env step, the one structure the learner connectors share.

Each column names the piece that fills it, so a reader can follow the combined advantage
A = A_out + w_ep * Delta_ep + w_step * Delta_step from the sampled episodes to the loss:

    EpisodesToStepSamples (this file)  episodes -> prompt, response, A_out, skills, plan match
    SkillPrompts  (skill_prompts.py)   analysis -> routed skills -> skill-augmented prompts
    RescoreWithOldPolicy (rescore.py)  log pi_old(y | x), log pi_old(y | x + skill)
    TeacherSamples (teacher_samples.py) optional: responses sampled under the skill prompt, added as rows
                                        (and, for the teacher anchor, the same under the skill prompt)
    CombineAdvantages (combine.py)     Delta, A, the padded tensor batch for the loss (losses.py)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from opid_rllib.advantages import plan_match

SAMPLES = "opid_samples"  # key of the StepSamples table in the pipeline's shared_data


@dataclass
class StepSamples:
    # -- EpisodesToStepSamples --------------------------------------------------------------
    prompt: list[str] = field(default_factory=list)              # the step's user prompt x
    response_ids: list[list[int]] = field(default_factory=list)  # sampled response y (token ids)
    sampling_logp: list[np.ndarray] = field(default_factory=list)  # log-probs the sampler reported
    outcome_adv: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # A_out (driver)
    traj_id: list[str] = field(default_factory=list)
    step_index: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # t within its trajectory
    skills: list[Optional[dict[str, Any]]] = field(default_factory=list)  # the trajectory's analysis
    # 1 if the sampled action equals the env's expert next action, 0 if it left the plan, NaN if the
    # env gives no expert plan (teacher diagnostics only; never used in the advantage).
    on_plan: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    expert_action: list[Optional[str]] = field(default_factory=list)  # the env's expert next action, else None
    env_name: list[Optional[str]] = field(default_factory=list)  # the runner's prompt family (projects actions)
    # -- SkillPrompts -----------------------------------------------------------------------
    episode_skill: list[Optional[str]] = field(default_factory=list)  # routed episode skill, else None
    step_skill: list[Optional[str]] = field(default_factory=list)     # routed step skill, else None
    prompt_ep: list[Optional[str]] = field(default_factory=list)      # x + episode skill
    prompt_step: list[Optional[str]] = field(default_factory=list)    # x + step skill
    # -- RescoreWithOldPolicy ---------------------------------------------------------------
    prompt_ids: list[list[int]] = field(default_factory=list)
    logp_old: list[np.ndarray] = field(default_factory=list)              # log pi_old(y | x)
    logp_ep: list[Optional[np.ndarray]] = field(default_factory=list)     # log pi_old(y | x + episode skill)
    logp_step: list[Optional[np.ndarray]] = field(default_factory=list)   # log pi_old(y | x + step skill)
    # -- TeacherSamples: on rows whose response the skill-conditioned teacher sampled (None elsewhere),
    # Delta_T = log pi_old(y_T | x + skill) - log pi_old(y_T | x) per token.
    sample_delta: list[Optional[np.ndarray]] = field(default_factory=list)
    # 1 on the teacher anchor's rows (x + skill, y_T), trained only toward pi_ref on the skill prompt (losses.py).
    anchor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    def __len__(self) -> int:
        return len(self.prompt)

    def stacked(self, other: "StepSamples", order: list[int]) -> "StepSamples":
        """Rows of self then other, re-ordered by `order` (indices into the stacked table).
        Every column must be filled for both tables (same length as the table) or empty in both."""
        out = StepSamples()
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if len(a) + len(b) == 0:
                continue
            if len(a) != len(self) or len(b) != len(other):
                raise ValueError(f"StepSamples.{f.name}: {len(a)} + {len(b)} rows for tables of "
                                 f"{len(self)} + {len(other)}")
            if isinstance(a, np.ndarray):
                setattr(out, f.name, np.concatenate([a, np.asarray(b, a.dtype)])[np.asarray(order, np.int64)])
            else:
                both = list(a) + list(b)
                setattr(out, f.name, [both[i] for i in order])
        return out

    @property
    def use_episode(self) -> np.ndarray:
        """q^ep: rows re-scored with their episode skill."""
        return np.asarray([s is not None for s in self.episode_skill], bool)

    @property
    def use_step(self) -> np.ndarray:
        """q^step: rows re-scored with their step skill."""
        return np.asarray([s is not None for s in self.step_skill], bool)


class EpisodesToStepSamples(ConnectorV2):
    """Flattens whole episodes into the step-sample table.

    The outcome advantage was computed on the driver per GRPO group (groups.py) and travels in
    `episode.custom_data["opid"]["outcome_adv"]`."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = StepSamples()
        adv_all, idx_all, plan_all, expert_all = [], [], [], []
        for ep in episodes:
            meta = ep.custom_data["opid"]
            adv = meta.get("outcome_adv")
            if adv is None or len(adv) != len(ep):
                raise ValueError(f"episode {meta.get('traj_id')} reached the learner without an outcome "
                                 "advantage per step: OPID.training_step (groups.attach_outcome_advantages) "
                                 "must set it before the update")
            extra = {k: ep.get_extra_model_outputs(k) for k in ("prompt", "response_ids", "response_len", "logp")}
            infos, actions = ep.get_infos(), ep.get_actions()
            for i in range(len(ep)):
                n = int(extra["response_len"][i])
                t.prompt.append(str(extra["prompt"][i]))
                t.response_ids.append([int(x) for x in extra["response_ids"][i][:n]])
                t.sampling_logp.append(np.asarray(extra["logp"][i][:n], np.float32))
                t.traj_id.append(meta["traj_id"])
                t.skills.append(meta.get("skills"))
                t.env_name.append(meta.get("env_name"))
                adv_all.append(float(adv[i]))
                idx_all.append(i)
                # infos[i] is what the agent saw before acting at step i (infos[0] = the reset info).
                plan = (infos[i] or {}).get("expert_actions")
                plan_all.append(plan_match(actions[i], plan))
                expert_all.append(str(plan[0]) if plan else None)
        t.outcome_adv = np.asarray(adv_all, np.float32)
        t.step_index = np.asarray(idx_all, np.int64)
        t.on_plan = np.asarray(plan_all, np.float32)
        t.expert_action = expert_all
        t.sample_delta = [None] * len(t)
        t.anchor = np.zeros(len(t), np.float32)
        shared_data[SAMPLES] = t
        return batch
