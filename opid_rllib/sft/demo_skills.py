"""The skills written into warm-start demos, in the hindsight analyzer's own words.

Why apart from the demo collection (demos.py): these are the texts the policy learns to read, and they must
be what the analyzer writes at RL time (the episode workflow, "At this point, X instead of 'Y'."), so they
call the analyzer's code; demos.py only decides where they go.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from opid_rllib.prompts import canonical_env_name
from opid_rllib.sft.responses import _short_task, command_key, searchqa_block


def step_skill_text(env_name: str, action: str) -> str:
    """A correct critical-step skill naming the expert's next command (hindsight analyzer's wording)."""
    env = canonical_env_name(env_name)
    a = " ".join(str(action).split())
    if env == "searchqa":
        kind, inner = searchqa_block(a)
        return f"At this point, {'search for' if kind == 'search' else 'answer'} '{inner}'."
    if re.match(r"^[a-z][a-z ]*\b", a) and "[" not in a and "<" not in a:
        return f"At this point, {a}."
    return f"At this point, choose '{a}'."


def _trajectory_record(env_name: str, ep: dict[str, Any]):
    """A won episode as the analyzer's input. Every demonstrated command counts as admissible: the
    env accepted it and the episode was won, while some envs list templates instead of concrete
    commands ('search[<your query>]', '<search>...</search>'), which the analyzer would treat as
    inadmissible detours."""
    from opid_rllib.analyzer import StepRecord, TrajectoryRecord

    recs = [StepRecord(index=i, observation=s["observation"], response=s["response"], action=s["action"],
                       action_valid=True, reward=s["reward"],
                       admissible_actions=list(s["admissible"])
                       + ([] if s["action"] in s["admissible"] else [s["action"]]),
                       expert_actions=s["expert_actions"]) for i, s in enumerate(ep["steps"])]
    return TrajectoryRecord(traj_id=f"{ep['task_id']}/expert", group_id=f"{ep['task_id']}#expert",
                            task_id=ep["task_id"], task=ep["task"], task_type=ep["task_type"],
                            env_name=canonical_env_name(env_name), success=True,
                            episode_reward=float(sum(s["reward"] for s in ep["steps"])), steps=recs,
                            ground_truth=dict(ep.get("ground_truth") or {}))


def skill_workflow(env_name: str, ep: dict[str, Any]) -> tuple[str, list[str]]:
    """(episode skill, its command list) for a won episode: the hindsight analyzer's success skill
    (RL-time wording: "To <task>: a, b, then c. Skip the detours: ...") and the compressed command
    list it is written from (detours such as 'look' or empty cabinets dropped)."""
    from opid_rllib.analyzer import HindsightAnalyzer
    from opid_rllib.analyzer.hindsight import _compress, _step_facts

    traj = _trajectory_record(env_name, ep)
    skills = HindsightAnalyzer().analyze(traj)
    # The analyzer's own compression, so the replayed commands are the ones the skill names.
    flow = [a for _, a in _compress(_step_facts(traj))]
    if not skills.ok or not flow:
        flow = [s["action"] for s in ep["steps"]]
        return f"To {_short_task(ep['task'], 30)}: " + ", then ".join(flow) + ".", flow
    return skills.episode_skill, flow


def _other_commands(admissible: Sequence[str], expert: str) -> list[str]:
    """The admissible commands other than the expert's and other than 'help'."""
    return [str(a) for a in admissible if command_key(a) not in (command_key(expert), "help")]


def wrong_action(admissible: Sequence[str], expert: str, rng: np.random.Generator) -> str | None:
    """A random admissible command other than the expert's (and other than 'help')."""
    pool = _other_commands(admissible, expert)
    return pool[int(rng.integers(len(pool)))] if pool else None


def analyzer_step_skill(env_name: str, s: dict[str, Any], rng: np.random.Generator) -> str:
    """The step skill the hindsight analyzer would write at this demonstrated step, for a policy
    that sampled a random wrong command (2/3) or the right one (1/3)."""
    sampled = s["action"]
    if rng.random() < 2 / 3:
        sampled = wrong_action(s["admissible"], s["action"], rng) or sampled
    return analyzer_skill(env_name, s, sampled=sampled, named=s["action"])


def analyzer_skill(env_name: str, s: dict[str, Any], *, sampled: str, named: str) -> str:
    """The hindsight analyzer's step skill at demonstrated step `s` for a policy that sampled `sampled`
    when the plan says `named` ("At this point, named instead of 'sampled'." / "At this point, named.")."""
    from opid_rllib.analyzer.base import StepRecord
    from opid_rllib.analyzer.oracle import oracle_step_skill

    step = StepRecord(index=len(s["history"]), observation=s["observation"], response="", action=sampled,
                      admissible_actions=list(s["admissible"]), expert_actions=[named])
    return oracle_step_skill(env_name, step) or step_skill_text(env_name, named)


def hint_action(admissible: Sequence[str], expert: str, rng: np.random.Generator) -> str | None:
    """A random admissible command other than the expert's, its verb drawn first: 'go to' commands
    outnumber the rest several times over, and a policy that only learned to copy locations would
    still ignore "take book 1 from ..." (measured: it did). Templates ('search[<your query>]') and
    'help' are never named."""
    pool = [a for a in _other_commands(admissible, expert) if "<" not in a]
    if not pool:
        return None
    by_verb: dict[str, list[str]] = {}
    for a in pool:
        words = command_key(a).split()
        by_verb.setdefault(" ".join(words[:2]) if words[:1] == ["go"] else words[0], []).append(a)
    verbs = sorted(by_verb)
    cands = by_verb[verbs[int(rng.integers(len(verbs)))]]
    return cands[int(rng.integers(len(cands)))]
