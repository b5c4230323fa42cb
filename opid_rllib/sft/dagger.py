"""Policy-state demonstrations (DAgger): the policy plays, the env's expert labels every state it reached.

Why: cloning the expert shows the policy only the states the expert visits. A warm-started tiny policy
leaves them within a few steps (it takes the wrong object, repeats a command), and from there it has
never seen a demonstration, so it loops until the step cap (measured: 1-3 of 126 unseen games won,
18-22 % agreement with the expert's next command). DAgger (Ross, Gordon & Bagnell, 2011) labels the
*policy's* state distribution with the expert's action and trains on the aggregate. The random
deviations of demos.py (`deviation_prob`) are a cheap stand-in; this module is the real thing.

The policy plays through the training runner (GroupedTextEnvRunner.sample_groups, no analyzer, no skills),
so each sample's prompt is the exact prompt the policy saw (the episode's "prompt" output) and its
label is the env's expert plan at that state (`infos[i]["expert_actions"][0]`, which the ALFWorld
expert keeps tracking after any command). States without a plan (the expert gave up) get no sample;
a state repeated within an episode (a loop: the same observation after the same command, the same
label) gives one sample, not one per repetition.
`hint_follow_prob` adds the hint-following samples of demos.py at these states (the step skill names
another admissible command, which is the target), so a base keeps reading skills where it now acts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from opid_rllib.prompts import insert_skills
from opid_rllib.sft.demo_skills import analyzer_skill, hint_action
from opid_rllib.sft.demos import Demo
from opid_rllib.sft.responses import checked_response, same_action


def play_policy(model: str, env_name: str, task_ids: Sequence[str], *, split: str = "train", history_length: int,
                max_steps: int, max_new_tokens: int = 48, temperature: float = 0.4, seed: int = 0,
                env_kwargs: dict | None = None, batch_envs: int = 16, dtype: str = "float32", progress=None) -> list:
    """Play each task id once with `model` as the deployed policy; the runner's finished episodes.

    progress(games_done, won=...) is called after each chunk of `batch_envs` games."""
    from envs.panels import Panel
    from opid_rllib.env_runner import GroupedTextEnvRunner
    from opid_rllib.eval.panel import build_eval_config
    from opid_rllib.play import play_tasks

    panel = Panel(name=f"{env_name}/{split}:policy-states", env=env_name, split=split,
                  task_ids=tuple(str(t) for t in task_ids), env_kwargs=dict(env_kwargs or {}))
    cfg = build_eval_config(None, panel=panel, llm_model=str(model), history_length=int(history_length),
                            max_steps=int(max_steps), max_new_tokens=int(max_new_tokens), dtype=str(dtype))
    cfg.validate()
    runner = GroupedTextEnvRunner(config=cfg)
    episodes: list = []
    played = 0

    def keep(chunk, chunk_episodes) -> None:
        nonlocal played
        episodes.extend(chunk_episodes)
        played += len(chunk)
        if progress is not None:
            progress(played, won=sum(bool(e.custom_data["opid"]["won"]) for e in episodes))

    try:  # the evaluation's own loop: same chunks, same per-chunk generation seeds (seed + k)
        play_tasks(runner, list(panel.task_ids), temperature=float(temperature), seed=int(seed),
                   batch_envs=int(batch_envs), progress=False, on_chunk=keep)
    finally:
        runner.stop()
    return episodes


def policy_state_demos(env_name: str, episodes: Sequence, *, response_style: str = "action",
                       hint_follow_prob: float = 0.0, seed: int | None = 0,
                       stats: dict | None = None) -> list[Demo]:
    """Expert-labelled samples at every distinct state of the policy's episodes (see the module doc)."""
    if not 0.0 <= float(hint_follow_prob) <= 1.0:
        raise ValueError(f"hint_follow_prob={hint_follow_prob}: must be in [0, 1]")
    rng = np.random.default_rng(None if seed is None else int(seed) + 15485863)
    counts = {"policy_episodes": len(episodes), "policy_won": 0, "policy_steps": 0, "labelled_states": 0,
              "policy_agreed": 0, "no_expert_plan": 0, "repeated_states": 0, "hint_follow_demos": 0}
    demos: list[Demo] = []
    for ep in episodes:
        meta = ep.custom_data.get("opid", {})
        counts["policy_won"] += int(bool(meta.get("won", False)))
        if not len(ep):
            continue
        prompts = list(ep.get_extra_model_outputs("prompt"))
        actions = [str(a) for a in ep.get_actions()]
        infos = list(ep.get_infos())[:len(ep)]  # infos[i], observations[i]: the state acted from at step i
        observations = [str(o) for o in ep.get_observations()][:len(ep)]
        seen: set[tuple] = set()
        for i, (prompt, sampled, info, obs) in enumerate(zip(prompts, actions, infos, observations)):
            counts["policy_steps"] += 1
            plan = list(info.get("expert_actions") or [])
            if not plan:
                counts["no_expert_plan"] += 1
                continue
            # the prompt itself never repeats (it counts steps): a loop is the same observation after the
            # same command with the same expert label
            key = (obs, actions[i - 1] if i else None, str(plan[0]))
            if key in seen:
                counts["repeated_states"] += 1
                continue
            seen.add(key)
            demo = _labelled(env_name, meta, i, prompt, str(plan[0]), response_style)
            if demo is None:
                counts["no_expert_plan"] += 1
                continue
            counts["labelled_states"] += 1
            counts["policy_agreed"] += int(same_action(env_name, sampled, demo.action))
            demos.append(demo)
            if hint_follow_prob > 0 and rng.random() < hint_follow_prob:
                hint = _hint_sample(env_name, meta, i, prompt, demo.action, info, obs, rng, response_style)
                if hint is not None:
                    counts["hint_follow_demos"] += 1
                    demos.append(hint)
    if stats is not None:
        stats.update(counts, demos=len(demos))
    return demos


def _labelled(env_name: str, meta: dict[str, Any], step: int, prompt: str, expert: str,
              response_style: str) -> Demo | None:
    checked = checked_response(env_name, task=meta.get("task", ""), action=expert, style=response_style)
    if checked is None:
        return None
    response, action = checked
    return Demo(env_name=env_name, task_id=str(meta.get("task_id", "")), step=step, prompt=prompt,
                response=response, action=action, base_prompt=prompt)


def _hint_sample(env_name: str, meta: dict[str, Any], step: int, prompt: str, expert: str, info: dict[str, Any],
                 obs: str, rng: np.random.Generator, response_style: str) -> Demo | None:
    """The step skill names another admissible command X ("At this point, X instead of '<expert's>'.", as
    demos.py writes it), and X is the target: only the skill says what to do."""
    admissible = list(info.get("admissible_actions", []))
    named = hint_action(admissible, expert, rng)
    demo = None if named is None else _labelled(env_name, meta, step, prompt, named, response_style)
    if demo is None:
        return None
    state = {"history": [None] * step, "observation": obs, "admissible": admissible}
    skill = analyzer_skill(env_name, state, sampled=expert, named=named)
    return replace(demo, prompt=insert_skills(prompt, step_skill=skill), step_skill=skill, hint_follow=True)


def collect_policy_demos(model: str, env_name: str, *, split: str = "train", num_tasks: int, history_length: int,
                         max_steps: int, seed: int, max_new_tokens: int = 48, temperature: float = 0.4,
                         env_kwargs: dict | None = None, response_style: str = "action",
                         hint_follow_prob: float = 0.0, dtype: str = "float32", stats: dict | None = None,
                         progress=None) -> list[Demo]:
    """`model` plays `num_tasks` games of `split` (a seeded sample, drawn with seed + 1 so it is not the expert
    demos' sample); every distinct state it reached becomes an expert-labelled sample (policy_state_demos)."""
    import envs as envs_pkg
    from opid_rllib.sft.demos import select_task_ids

    if int(num_tasks) < 1:
        raise ValueError(f"num_tasks={num_tasks}: must be >= 1")
    name = envs_pkg.env_name_of(env_name)
    kw = dict(env_kwargs or {}, split=split)
    env = envs_pkg.make(name, **kw)
    try:
        ids = select_task_ids(env.task_ids(), int(num_tasks), int(seed) + 1)
    finally:
        env.close()
    episodes = play_policy(model, name, ids, split=split, history_length=history_length, max_steps=max_steps,
                           max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                           env_kwargs=env_kwargs, dtype=dtype, progress=progress)
    return policy_state_demos(name, episodes, response_style=response_style, hint_follow_prob=hint_follow_prob,
                              seed=seed, stats=stats)
