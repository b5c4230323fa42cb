"""The step-sample table: one row per env step, the one structure the learner connectors share.

Each column names the piece that fills it, so a reader can follow the combined advantage
A = A_out + w_ep * Delta_ep + w_step * Delta_step from the sampled episodes to the loss:

    OutcomeAdvantage (outcome.py)       A_out per step, from each GRPO group
    EpisodesToStepSamples (this file)   episodes -> prompt x (text and token ids), response y, A_out, plan match;
                                        each trajectory's facts (length, usable analysis) once, in `trajectories`
    SkillPrompts  (skill_prompts.py)    routes -> skill-augmented prompts (those that fit max_prompt_len)
    RescoreWithOldPolicy (rescore.py)   log pi_old(y | x), log pi_old(y | x + skill)
    CombineAdvantages (combine.py)      Delta, A, the routes trained, the padded tensor batch for the loss

Research plug-ins (opid_rllib/experimental/) add their own columns in `extra`; none exist when they are off.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID

from opid_rllib.advantages import plan_match
from opid_rllib.connectors.outcome import OUTCOME_ADV
from opid_rllib.prompts.skills import UsableSkills, usable_skills

SAMPLES = "opid_samples"  # key of the StepSamples table in the pipeline's shared_data


@dataclass
class Trajectory:
    """What the pipeline knows about one trajectory, computed once (EpisodesToStepSamples)."""

    rows: slice                       # its rows in the table, in step order
    analysed: bool                    # the analyzer returned something (usable or not)
    skills: Optional[UsableSkills]    # its usable analysis, else None (no teacher term)


@dataclass
class StepSamples:
    # -- EpisodesToStepSamples --------------------------------------------------------------
    prompt: list[str] = field(default_factory=list)              # the step's user prompt x
    prompt_ids: list[list[int]] = field(default_factory=list)    # x, chat-templated and tokenized (once)
    response_ids: list[list[int]] = field(default_factory=list)  # sampled response y (token ids)
    sampling_logp: list[np.ndarray] = field(default_factory=list)  # log-probs the sampler reported
    outcome_adv: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # A_out (OutcomeAdvantage)
    traj_id: list[str] = field(default_factory=list)
    step_index: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # t within its trajectory
    # 1 if the sampled action equals the env's expert next action, 0 if it left the plan, NaN if the
    # env gives no expert plan (teacher diagnostics only; never used in the advantage).
    on_plan: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    expert_action: list[Optional[str]] = field(default_factory=list)  # the env's expert next action, else None
    env_name: list[Optional[str]] = field(default_factory=list)  # the runner's prompt family (projects actions)
    # -- SkillPrompts: the routed skill and its prompt x + skill (None: not routed, or the prompt was cut) ----------
    episode_skill: list[Optional[str]] = field(default_factory=list)
    step_skill: list[Optional[str]] = field(default_factory=list)
    prompt_ep: list[Optional[list[int]]] = field(default_factory=list)    # token ids of x + episode skill
    prompt_step: list[Optional[list[int]]] = field(default_factory=list)  # token ids of x + step skill
    # -- RescoreWithOldPolicy ---------------------------------------------------------------
    logp_old: list[np.ndarray] = field(default_factory=list)              # log pi_old(y | x)
    # the PPO ratio's denominator: logp_old, or the sampler's log-probs (a stale batch without recompute_old_logp)
    ratio_logp: list[np.ndarray] = field(default_factory=list)
    logp_ep: list[Optional[np.ndarray]] = field(default_factory=list)     # log pi_old(y | x + episode skill)
    logp_step: list[Optional[np.ndarray]] = field(default_factory=list)   # log pi_old(y | x + step skill)
    # -- research plug-ins' columns (opid_rllib/experimental/), name -> one entry per row --------------------------
    extra: dict[str, list] = field(default_factory=dict)
    # -- per trajectory (not per row): EpisodesToStepSamples --------------------------------
    trajectories: dict[str, Trajectory] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompt)

    def stacked(self, other: "StepSamples", order: list[int]) -> "StepSamples":
        """Rows of self then other, re-ordered by `order` (indices into the stacked table); the trajectories are
        self's. Every column must be filled for both tables (same length as the table) or empty in both."""
        out = StepSamples(trajectories=self.trajectories)
        pairs = [(f.name, getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
                 if f.name not in ("extra", "trajectories")]
        pairs += [(f"extra[{k!r}]", self.extra[k], other.extra.get(k, [])) for k in self.extra]
        for name, a, b in pairs:
            if len(a) + len(b) == 0:
                continue
            if len(a) != len(self) or len(b) != len(other):
                raise ValueError(f"StepSamples.{name}: {len(a)} + {len(b)} rows for tables of "
                                 f"{len(self)} + {len(other)}")
            if isinstance(a, np.ndarray):
                value = np.concatenate([a, np.asarray(b, a.dtype)])[np.asarray(order, np.int64)]
            else:
                both = list(a) + list(b)
                value = [both[i] for i in order]
            if name.startswith("extra["):
                out.extra[name[7:-2]] = value
            else:
                setattr(out, name, value)
        return out

    @property
    def use_episode(self) -> np.ndarray:
        """Rows with an episode-skill prompt (SkillPrompts)."""
        return np.asarray([s is not None for s in self.prompt_ep], bool)

    @property
    def use_step(self) -> np.ndarray:
        """Rows with a step-skill prompt (SkillPrompts)."""
        return np.asarray([s is not None for s in self.prompt_step], bool)


def policy_module(rl_module):
    """The LLMRLModule behind a MultiRLModule / DDP wrapper."""
    m = rl_module[DEFAULT_MODULE_ID] if DEFAULT_MODULE_ID in getattr(rl_module, "keys", lambda: [])() else rl_module
    return m.unwrapped() if hasattr(m, "unwrapped") else m


def log(metrics, key: str, value) -> None:
    """A learner metric under opid/ (the last value of the iteration)."""
    if metrics is not None:
        metrics.log_value(("opid", *key.split("/")), float(value), window=1)


class EpisodesToStepSamples(ConnectorV2):
    """Flattens whole episodes into the step-sample table, with A_out from OutcomeAdvantage."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        t = StepSamples()
        adv_all, idx_all, plan_all, expert_all = [], [], [], []
        for ep, adv in zip(episodes, shared_data[OUTCOME_ADV], strict=True):
            meta = ep.custom_data["opid"]
            start = len(t)
            extra = {k: ep.get_extra_model_outputs(k) for k in ("prompt", "response_ids", "response_len", "logp")}
            infos, actions = ep.get_infos(), ep.get_actions()
            for i in range(len(ep)):
                n = int(extra["response_len"][i])
                t.prompt.append(str(extra["prompt"][i]))
                t.response_ids.append([int(x) for x in extra["response_ids"][i][:n]])
                t.sampling_logp.append(np.asarray(extra["logp"][i][:n], np.float32))
                t.traj_id.append(meta["traj_id"])
                t.env_name.append(meta.get("env_name"))
                idx_all.append(i)
                # infos[i] is what the agent saw before acting at step i (infos[0] = the reset info).
                plan = (infos[i] or {}).get("expert_actions")
                plan_all.append(plan_match(actions[i], plan))
                expert_all.append(str(plan[0]) if plan else None)
            adv_all.append(adv)
            skills = meta.get("skills")
            t.trajectories[meta["traj_id"]] = Trajectory(slice(start, len(t)), skills is not None,
                                                         usable_skills(skills))
        t.outcome_adv = np.concatenate(adv_all).astype(np.float32) if adv_all else np.zeros(0, np.float32)
        t.step_index = np.asarray(idx_all, np.int64)
        t.on_plan = np.asarray(plan_all, np.float32)
        t.expert_action = expert_all
        t.prompt_ids, _ = policy_module(rl_module).encode_prompts(t.prompt)
        shared_data[SAMPLES] = t
        return batch
