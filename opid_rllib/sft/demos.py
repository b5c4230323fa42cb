"""Expert demonstrations for the behaviour-cloning warm start (`opid-sft`), one `Demo` per expert step.

Why a module of its own: which prompts and responses the policy is cloned on is a separate concern
from how it is trained (opid_rllib/sft/train.py). The prompt is the runner's own: `build_prompt(...)` with
the runner's history of (raw observation, projected action) pairs, step = actions taken, the same
history_length (GroupedTextEnvRunner._prompt_for); the response is in the format `project_action`
accepts. A fraction of the episodes carry a *correct* skill, so the warm-started policy reacts to
skills, which OPID's teacher signal (log-prob change when a skill is inserted) relies on: the
hindsight analyzer's workflow of the expert's own successful run as the episode skill (the
demonstrated episode then replays that compressed workflow, so the expert's detours never
contradict the skill), or "At this point, <demonstrated command>." as a critical-step skill. The
response texts are in responses.py, the skill texts in demo_skills.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from opid_rllib.prompts import build_prompt, insert_skills
from opid_rllib.sft.demo_skills import (analyzer_skill, analyzer_step_skill, hint_action, skill_workflow,
                                        step_skill_text, wrong_action)
from opid_rllib.sft.responses import RESPONSE_STYLES, checked_response, expert_response  # noqa: F401 (re-export)


# Skill modes of a skill-augmented episode and their probabilities.
SKILL_MODES = (("episode", 0.4), ("step", 0.4), ("both", 0.2))
STEP_SKILL_PROB = 0.5  # in "step"/"both" mode: chance that a given step gets a step skill


@dataclass
class Demo:
    """One expert step as an SFT sample: user prompt (as the runner builds it) -> target response."""

    env_name: str
    task_id: str
    step: int                    # actions taken before this one (= the runner's `step`)
    prompt: str                  # user text, skill sections inserted when present
    response: str                # target response in the projection's format (no EOS)
    action: str                  # the command sent to the env (project_action(response)[0])
    base_prompt: str             # the same prompt without skills (what the runner shows)
    episode_skill: str | None = None
    step_skill: str | None = None
    hint_follow: bool = False    # auxiliary sample: the target is the (non-expert) command the skill names

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- demonstrations ----------------------------------------------------------------------------
def select_task_ids(all_ids: Sequence[str], num_tasks: int, seed: int | None) -> list[str]:
    """seed=None: the first num_tasks ids; else a seeded sample (without replacement) of them."""
    ids = [str(t) for t in all_ids]
    n = min(int(num_tasks), len(ids))
    if seed is None:
        return ids[:n]
    order = np.random.default_rng(int(seed)).permutation(len(ids))[:n]
    return [ids[int(i)] for i in order]


def _play(env, env_name: str, task_id: str, max_steps: int, plan: Sequence[str] | None = None,
          deviation_prob: float = 0.0, rng: np.random.Generator | None = None,
          response_style: str = "reasoned", demonstrator=None, repeat_prob: float = 0.0) -> dict[str, Any] | None:
    """Play from reset with the runner's bookkeeping; None unless the episode is won.

    plan=None follows the live expert (expert_actions[0] at every step); a fixed `plan` is played
    command by command (the skill workflow replay). Each step's `expert_actions` is what the
    demonstrated command was taken from (the expert's plan, or the rest of the fixed plan).
    deviation_prob > 0 (live expert only, DAgger-style recovery states): before a step, with that
    probability, a random admissible non-expert command is played first; it is no demonstration, only
    history, so the next demonstrated step is the expert's recovery from where a policy would stray.
    repeat_prob > 0: that share of the deviations repeats the previous command instead, which in ALFWorld
    changes nothing ("Nothing happens."): the loop a cloned student falls into, and its way out.
    demonstrator (live play only): its `act` replaces the expert's plan (envs.make_demonstrator).
    """
    obs, info = env.reset(options={"task_id": task_id})
    if demonstrator is not None:
        demonstrator.reset(obs, info)
    steps: list[dict[str, Any]] = []
    history: list[tuple[str, str]] = []
    task, task_type = info.get("task", ""), info.get("task_type", "")
    while True:
        if plan is not None:
            todo = list(plan[len(steps):])
        elif demonstrator is not None:
            todo = [c for c in [demonstrator.act(obs, info)] if c]
        else:
            todo = list(info.get("expert_actions") or [])
        if not todo:
            return None
        if plan is None and deviation_prob > 0 and rng is not None and rng.random() < deviation_prob \
                and len(history) + 2 < max_steps:
            if repeat_prob > 0 and history and rng.random() < repeat_prob:
                wrong = history[-1][1]
            else:
                wrong = wrong_action(info.get("admissible_actions", []), todo[0], rng)
            if wrong is not None:
                prev_obs = obs
                obs, _, term, trunc, info = env.step(wrong)
                history.append((prev_obs, wrong))
                if demonstrator is not None:
                    demonstrator.observe(wrong, obs)
                if term or trunc:
                    return None
                continue
        checked = checked_response(env_name, task=task, action=todo[0], style=response_style)
        if checked is None:
            return None
        response, action = checked
        steps.append({"observation": obs, "history": list(history),
                      "admissible": list(info.get("admissible_actions", [])), "response": response,
                      "action": action, "expert_actions": todo, "reward": 0.0})
        prev_obs = obs
        obs, reward, term, trunc, info = env.step(action)
        steps[-1]["reward"] = float(reward)
        history.append((prev_obs, action))
        if demonstrator is not None:
            demonstrator.observe(action, obs)
        if not (term or trunc) and len(history) >= max_steps:
            trunc = True  # the runner's cap
        if term or trunc:
            if not info.get("won", False):
                return None
            return {"task_id": task_id, "task": task, "task_type": task_type, "steps": steps,
                    "ground_truth": info.get("ground_truth") or {}}


def collect_demonstrations(env_name: str, *, split: str = "train", num_tasks: int, history_length: int,
                           max_steps: int, seed: int | None, skill_fraction: float = 0.3,
                           env_kwargs: dict | None = None, task_ids: Sequence[str] | None = None,
                           stats: dict | None = None, progress=None, step_skill_wording: str = "plain",
                           deviation_prob: float = 0.0, response_style: str = "reasoned",
                           hint_follow_prob: float = 0.0, demonstrator: str = "expert",
                           deviation_repeat_prob: float = 0.0) -> list[Demo]:
    """Expert demonstrations on `num_tasks` tasks of `split` (a seeded sample; seed=None: the first
    ones; `task_ids` overrides the choice). Only episodes the expert won are kept.

    A `skill_fraction` of the episodes carry a correct skill, in one of three modes (SKILL_MODES):
    "episode": the hindsight workflow of the expert's run is the episode skill of every step, and
    the demonstrated episode *follows that workflow* (replayed in the env; detours such as 'look'
    dropped), so the response always agrees with the skill; "step": at random steps a
    critical-step skill names the demonstrated command; "both". When the workflow replay does not
    win, the episode falls back to "step" mode. `stats`, if given, gets the counts; `progress`, if
    given, is called as progress(games_done, won=...) after each game (ALFWorld's expert takes
    seconds per game, so a large collection takes minutes).

    step_skill_wording="analyzer": step skills in the hindsight analyzer's RL-time wording
    (analyzer.oracle.oracle_step_skill), two thirds of them "At this point, X instead of 'Y'." with
    Y a random admissible command, so the policy learns to follow X named next to a wrong Y exactly
    as skills are written at RL time; "plain": "At this point, X." only. deviation_prob: recovery
    states (see `_play`); deviation_repeat_prob: the share of them that repeat the previous command (`_play`'s
    repeat_prob). response_style: see `expert_response`.

    hint_follow_prob > 0 (the auxiliary hint-following objective): each demonstrated step, with that
    probability, also yields one extra sample whose step skill, in the analyzer's wording, names a
    random admissible command X other than the expert's (verb first, see `demo_skills.hint_action`)
    ("At this point, X instead of '<expert's>'.") and whose target is X. On those samples only the
    skill says what to do, so the policy must learn to read it: that is the mechanism OPID's teacher
    needs (a model that ignores named actions has no skill headroom). The skill-free samples are
    unchanged, so the student is cloned as before."""
    import envs as envs_pkg

    if step_skill_wording not in ("plain", "analyzer"):
        raise ValueError(f"step_skill_wording={step_skill_wording!r}: must be 'plain' or 'analyzer'")
    if not 0.0 <= float(deviation_prob) < 1.0:
        raise ValueError(f"deviation_prob={deviation_prob}: must be in [0, 1)")
    if not 0.0 <= float(deviation_repeat_prob) <= 1.0:
        raise ValueError(f"deviation_repeat_prob={deviation_repeat_prob}: must be in [0, 1]")
    if float(deviation_repeat_prob) > 0 and not float(deviation_prob) > 0:
        raise ValueError(f"deviation_repeat_prob={deviation_repeat_prob}: a share of the deviations, and "
                         "deviation_prob=0 makes none; set deviation_prob > 0")
    if not 0.0 <= float(hint_follow_prob) <= 1.0:
        raise ValueError(f"hint_follow_prob={hint_follow_prob}: must be in [0, 1]")
    if response_style not in RESPONSE_STYLES:
        raise ValueError(f"response_style={response_style!r}: must be one of {RESPONSE_STYLES}")

    name = envs_pkg.env_name_of(env_name)
    if int(num_tasks) < 1:
        raise ValueError(f"num_tasks={num_tasks}: must be >= 1")
    if int(max_steps) < 1:
        raise ValueError(f"max_steps={max_steps}: must be >= 1")
    if not 0.0 <= float(skill_fraction) <= 1.0:
        raise ValueError(f"skill_fraction={skill_fraction}: must be in [0, 1]")
    kw = dict(env_kwargs or {})
    kw.setdefault("split", split)
    kw.setdefault("max_steps", int(max_steps))
    player = envs_pkg.make_demonstrator(name, demonstrator)  # None: the env's expert; reset() per game
    env = envs_pkg.make(name, **kw)
    counts = {"episodes_won": 0, "episodes_with_skills": 0, "skill_modes": {}, "workflow_replays_failed": 0,
              "env_errors": 0, "hint_follow_demos": 0}
    try:
        ids = list(task_ids) if task_ids is not None else select_task_ids(env.task_ids(), num_tasks, seed)
        if not ids:
            raise ValueError(f"env={name!r} split={kw['split']!r} has no tasks")
        rng = np.random.default_rng(None if seed is None else int(seed) + 7919)
        # own stream: hint samples leave every other sample exactly as with hint_follow_prob=0
        hint_rng = np.random.default_rng(None if seed is None else int(seed) + 104729)
        demos: list[Demo] = []
        for n_done, task_id in enumerate(ids):
            if progress is not None and n_done:
                progress(n_done, won=counts["episodes_won"])
            try:
                ep = _play(env, name, task_id, int(max_steps), deviation_prob=float(deviation_prob), rng=rng,
                           response_style=response_style, demonstrator=player,
                           repeat_prob=float(deviation_repeat_prob))
            except Exception:  # a crashing game must not end the collection (the runner does the same)
                counts["env_errors"] += 1
                env = _rebuild(env, envs_pkg, name, kw)
                continue
            if ep is None:
                continue
            counts["episodes_won"] += 1
            mode = _skill_mode(rng, skill_fraction)
            ep_skill = None
            if mode in ("episode", "both"):
                ep_skill, flow = skill_workflow(name, ep)
                if flow != [s["action"] for s in ep["steps"]]:
                    try:
                        replay = _play(env, name, task_id, int(max_steps), plan=flow, response_style=response_style)
                    except Exception:
                        counts["env_errors"] += 1
                        env, replay = _rebuild(env, envs_pkg, name, kw), None
                    if replay is None:
                        counts["workflow_replays_failed"] += 1
                        mode, ep_skill = "step", None
                    else:
                        ep = replay
            if mode is not None:
                counts["episodes_with_skills"] += 1
                counts["skill_modes"][mode] = counts["skill_modes"].get(mode, 0) + 1
            demos.extend(_episode_demos(name, ep, history_length, mode, ep_skill, rng, step_skill_wording))
            if hint_follow_prob > 0:
                hints = _hint_follow_demos(name, ep, history_length, hint_rng, float(hint_follow_prob),
                                           response_style)
                counts["hint_follow_demos"] += len(hints)
                demos.extend(hints)
    finally:
        try:
            env.close()
        except Exception:
            pass
    if stats is not None:
        stats.update({"env": name, "split": kw["split"], "episodes_tried": len(ids), **counts, "demos": len(demos)})
    return demos


def _rebuild(env, envs_pkg, name: str, kw: dict):
    try:
        env.close()
    except Exception:
        pass
    return envs_pkg.make(name, **kw)


def _skill_mode(rng: np.random.Generator, skill_fraction: float) -> str | None:
    if not rng.random() < skill_fraction:
        return None
    names, probs = zip(*SKILL_MODES)
    return names[int(rng.choice(len(names), p=np.asarray(probs) / sum(probs)))]


def _episode_demos(env_name: str, ep: dict[str, Any], history_length: int, mode: str | None, ep_skill: str | None,
                   rng: np.random.Generator, wording: str = "plain") -> list[Demo]:
    steps = ep["steps"]
    step_idx: set[int] = set()
    if mode in ("step", "both"):
        step_idx = {i for i in range(len(steps)) if rng.random() < STEP_SKILL_PROB}
        if not step_idx:
            step_idx = {int(rng.integers(len(steps)))}
    out = []
    for i, s in enumerate(steps):
        base = _base_prompt(env_name, ep, s, history_length)
        st_skill = None
        if i in step_idx:
            st_skill = (analyzer_step_skill(env_name, s, rng) if wording == "analyzer"
                        else step_skill_text(env_name, s["action"]))
        prompt = insert_skills(base, episode_skill=ep_skill, step_skill=st_skill)
        out.append(Demo(env_name=env_name, task_id=ep["task_id"], step=len(s["history"]), prompt=prompt,
                        response=s["response"], action=s["action"], base_prompt=base, episode_skill=ep_skill,
                        step_skill=st_skill))
    return out


def _hint_follow_demos(env_name: str, ep: dict[str, Any], history_length: int, rng: np.random.Generator,
                       prob: float, response_style: str) -> list[Demo]:
    """Extra samples whose target is the admissible non-expert command their step skill names
    (see collect_demonstrations' hint_follow_prob); skipped where no other admissible command exists."""
    out = []
    for s in ep["steps"]:
        if not rng.random() < prob:
            continue
        named = hint_action(s["admissible"], s["action"], rng)
        if named is None:
            continue
        checked = checked_response(env_name, task=ep["task"], action=named, style=response_style)
        if checked is None:
            continue
        response, action = checked
        skill = analyzer_skill(env_name, s, sampled=s["action"], named=named)
        base = _base_prompt(env_name, ep, s, history_length)
        out.append(Demo(env_name=env_name, task_id=ep["task_id"], step=len(s["history"]),
                        prompt=insert_skills(base, step_skill=skill), response=response, action=action,
                        base_prompt=base, step_skill=skill, hint_follow=True))
    return out


def _base_prompt(env_name: str, ep: dict[str, Any], s: dict[str, Any], history_length: int) -> str:
    """The runner's prompt (no skills) at demonstrated step `s` of episode `ep`."""
    return build_prompt(env_name, task=ep["task"], obs=s["observation"], history=s["history"],
                        admissible=s["admissible"], step=len(s["history"]), history_length=int(history_length))
