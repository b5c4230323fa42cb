"""Grouped multi-turn rollouts of an LLM policy over text envs, as an RLlib EnvRunner.

A call to `sample_groups(task_ids)` plays `len(task_ids) x group_size` episodes: every task id
is reset in `group_size` env copies (same game -> one GRPO group), and all live envs are
stepped together so generation is batched across the whole rollout. Each step builds a fresh
single-turn prompt (task, last-k history, observation, admissible actions), which is why a
step is one training sample.

We hold plain python lists of envs instead of a gymnasium vector env: gymnasium batches `Text`
observations as a tuple of str that RLlib's `unbatch` splits into characters.

When an episode ends it is handed to the analyzer pool at once, so analysis overlaps the rest
of the rollout; `sample_groups` joins the futures before returning. Pipelined (`defer_analyses`, set by
pipeline.sample_batch), the analyses go to an analyzer actor instead and the episode carries its ObjectRef
(ANALYSIS_REF), which the driver collects: the runner returns as soon as the rollouts end.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import time
import uuid
from typing import Any, Mapping, Sequence

import numpy as np
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.metrics import (
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
)

import envs as envs_pkg
from envs.base import text_space
from opid_rllib import process_rng, progress
from opid_rllib.analyzer.base import discounted_returns
from opid_rllib.pipeline import ANALYSIS_REF
from opid_rllib.prompts import build_prompt, insert_skills, project_action
from opid_rllib.prompts.admissible import is_inadmissible

logger = logging.getLogger(__name__)
ENV_ERROR_OBS = "[environment error: this episode was stopped]"


class _SpacesShim:
    """What RLlib's SingleAgentEnvRunner machinery reads off `self.env` (spaces only)."""

    def __init__(self):
        self.observation_space = self.single_observation_space = text_space()
        self.action_space = self.single_action_space = text_space()
        self.num_envs = 1
        self.unwrapped = None

    def close(self):
        pass


class GroupedTextEnvRunner(SingleAgentEnvRunner):
    """`config.opid_runner_settings()` (see algorithm.py) carries everything this runner reads."""

    def __init__(self, *, config, **kwargs):
        self._envs: list = []
        self._env_config_override: dict | None = None  # set while evaluation plays another split (play_on)
        self._env_pools: dict[str, list] = {}  # those splits' envs, kept for the next evaluation
        self._analyzer_pool = None
        # Pipelined runs (pipeline.sample_batch sets both): analyses go to this actor and travel as ObjectRefs.
        self._analyzer_actor, self.defer_analyses = None, False
        self._analyzer_last: dict = {}
        self._skill_cache: dict[str, str] = {}  # task_id -> last episode skill (Skill-GRPO preset)
        super().__init__(config=config, **kwargs)
        self.settings = config.opid_runner_settings()
        try:
            self.env_name = envs_pkg.env_name_of(config.env)
        except ValueError:  # a user-registered gymnasium id: the env names its prompt family
            self.env_name = getattr(self._make_env(0), "env_name", "text")

    # ---- RLlib plumbing -----------------------------------------------------------------
    def make_env(self) -> None:
        self.env = _SpacesShim()
        self.num_envs = 1

    def get_spaces(self):
        return {"__env__": (text_space(), text_space()), "__env_single__": (text_space(), text_space()),
                "default_policy": (text_space(), text_space())}

    def assert_healthy(self):
        assert self.module is not None, "GroupedTextEnvRunner has no RLModule"

    def sample(self, *, task_ids: Sequence[str] | None = None, explore: bool = True, **kwargs):
        """RLlib entry point (OPID itself calls `sample_groups` with the iteration's task ids): `tasks_per_iter` tasks
        drawn afresh on every call from this runner's own task stream, seeded once."""
        if task_ids is None:
            ids = self._make_env(0).task_ids()
            if getattr(self, "_sample_rng", None) is None:
                self._sample_rng = np.random.default_rng(self._seed)
            task_ids = [ids[int(i)] for i in self._sample_rng.integers(len(ids), size=self.settings["tasks_per_iter"])]
        return self.sample_groups(task_ids, explore=explore)

    def resume_state(self) -> dict:
        """What a checkpoint must carry of this runner beyond RLlib's own runner state, which RLlib saves from one
        runner only and restores by broadcasting to all: this process's random generators and the Skill-GRPO
        preset's per-task skills. OPID.get_state collects it from every runner, keyed by worker index."""
        return {"rng": process_rng.capture(), "skill_cache": dict(self._skill_cache)}

    def set_resume_state(self, state: dict | None) -> None:
        if state:
            process_rng.restore(state.get("rng"))
            self._skill_cache = dict(state.get("skill_cache") or {})

    def stop(self):
        if self._analyzer_pool is not None:
            self._analyzer_pool.close()
        for env in [e for pool in [self._envs, *self._env_pools.values()] for e in pool]:
            try:
                env.close()
            except Exception:
                pass

    # ---- envs ---------------------------------------------------------------------------
    def _make_env(self, i: int):
        while len(self._envs) <= i:
            self._envs.append(envs_pkg.make(self.config.env, **self._env_config()))
        return self._envs[i]

    def _rebuild_env(self, i: int):
        """A fresh env in slot i; raises what the env's constructor raises (callers count it)."""
        if i >= len(self._envs):  # slot i was never built: its first construction failed
            return self._make_env(i)
        try:
            self._envs[i].close()
        except Exception:
            pass
        self._envs[i] = envs_pkg.make(self.config.env, **self._env_config())
        return self._envs[i]

    def _env_config(self) -> dict:
        return dict(self.config.env_config if self._env_config_override is None else self._env_config_override)

    @contextlib.contextmanager
    def play_on(self, env_config: Mapping[str, Any]):
        """Play on envs built from `env_config` (an evaluation panel's split) inside the block, with plain prompts
        (no cached skills), then go back to the training envs: evaluation on the training runners
        (evaluation.py) needs no second copy of the model."""
        key = json.dumps(dict(env_config), sort_keys=True, default=str)
        saved = (self._envs, self._env_config_override, self._skill_cache)
        self._envs, self._env_config_override, self._skill_cache = self._env_pools.setdefault(key, []), \
            dict(env_config), {}
        try:
            yield self
        finally:
            self._envs, self._env_config_override, self._skill_cache = saved

    @property
    def analyzer_pool(self):
        s = self.settings
        if self._analyzer_pool is None and s["analyzer"] not in (None, "none"):
            from opid_rllib.analyzer import AnalyzerPool, make_analyzer
            from opid_rllib.analyzer.actor import analyzer_options

            analyzer = make_analyzer(s["analyzer"], **analyzer_options(s))
            self._analyzer_pool = AnalyzerPool(analyzer, num_workers=s["analyzer_num_workers"])
        return self._analyzer_pool

    # ---- the grouped rollout ------------------------------------------------------------
    def sample_groups(self, task_ids: Sequence[str], *, explore: bool = True, analyze: bool | None = None,
                      group_size: int | None = None, temperature: float | None = None,
                      seed: int | None = None, skills: str = "none",
                      skill_routes: Sequence[Sequence[Any]] | None = None) -> list[SingleAgentEpisode]:
        """skills="oracle" plays with the skill teacher's prompt at every step (see `_oracle_pass`):
        the skill-headroom evaluation. Training always plays plain prompts ("none").
        skill_routes (group_size 1, one per task id): step t of episode k plays from its plain prompt with
        skill_routes[k][t] = (episode skill, step skill) inserted (either None; none past its end), as OPID's re-score
        inserts them: the self-teacher acting on the skills written for another play (eval/gap.py)."""
        if skills not in ("none", "oracle"):
            raise ValueError(f"skills={skills!r}: must be 'none' or 'oracle'")
        if skill_routes is not None and (len(skill_routes) != len(task_ids) or (group_size or 1) != 1
                                         or skills != "none"):
            raise ValueError("skill_routes: one route list per task id, with group_size=1 and skills='none'")
        s = self.settings
        g = int(group_size or (s["group_size"] if explore else 1))
        analyze = (s["analyzer"] not in (None, "none")) if analyze is None else analyze
        temp = temperature if temperature is not None else (s["temperature"] if explore else s["eval_temperature"])
        module = self.module
        t_start = time.perf_counter()
        timers = {"generate_s": 0.0, "env_s": 0.0, "analyzer_wait_s": 0.0}
        counts = {"env_errors": 0, "prompt_truncations": 0, "steps": 0, "oracle_skill_steps": 0,
                  "format_invalid_steps": 0, "inadmissible_steps": 0}

        slots = []  # one per env copy
        for k, task_id in enumerate(task_ids):
            group_id = f"{task_id}#{uuid.uuid4().hex[:8]}"
            for c in range(g):
                slot = self._reset_slot(len(slots), str(task_id), group_id, c, counts)
                if slot is not None:
                    slot["routes"] = None if skill_routes is None else list(skill_routes[k])
                    slots.append(slot)
        futures = {}
        gen_seed = seed
        for rnd in itertools.count():
            live = [sl for sl in slots if not sl["done"]]
            if not live:
                break
            # the driver's heartbeat reads it (progress.py); the step cap bounds the rounds left
            progress.post("rollout step", rnd, max(rnd, s["max_steps"]), f"({len(live)} of {len(slots)} playing)",
                          bound=True)
            prompts = [self._prompt_for(sl) for sl in live]
            ids, cut = module.encode_prompts(prompts)
            counts["prompt_truncations"] += int(sum(cut))
            t0 = time.perf_counter()
            gens = module.generate(ids, temperature=temp, seed=gen_seed)
            if skills == "oracle":
                prompts, gens, cut = self._oracle_pass(live, prompts, gens, cut, temp, gen_seed, counts)
            timers["generate_s"] += time.perf_counter() - t0
            gen_seed = None if gen_seed is None else gen_seed + 1
            t0 = time.perf_counter()
            for sl, prompt, gen, was_cut in zip(live, prompts, gens, cut):
                self._step_slot(sl, prompt, gen, was_cut, counts)
                if sl["done"] and analyze and self._should_analyze(sl):
                    if self.defer_analyses:  # pipelined: the driver collects it (pipeline.collect_analyses)
                        ref = self._analyzer_actor.analyze.remote(self._trajectory_record(sl))
                        sl["episode"].custom_data["opid"][ANALYSIS_REF] = ref
                    else:
                        futures[id(sl)] = self.analyzer_pool.submit(self._trajectory_record(sl))
            timers["env_s"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        episodes = []
        for k, sl in enumerate(slots):
            if futures:
                progress.post("analyses received", k, len(slots))
            fut = futures.get(id(sl))
            skills = fut.result() if fut is not None else None
            sl["episode"].custom_data["opid"]["skills"] = skills.to_dict() if skills is not None else None
            if skills is not None and skills.ok and s["skills_in_rollout_prompt"]:
                self._skill_cache[sl["task_id"]] = skills.episode_skill
            episodes.append(sl["episode"])
        timers["analyzer_wait_s"] = time.perf_counter() - t0
        self._log_sample_metrics(episodes, timers, counts, time.perf_counter() - t_start)
        return episodes

    def _reset_slot(self, i, task_id, group_id, copy_idx, counts):
        for attempt in range(2):
            try:  # building the env counts too: a backend that is gone fails in the constructor
                env = self._make_env(i) if attempt == 0 else self._rebuild_env(i)
                obs, info = env.reset(options={"task_id": task_id})
                break
            except Exception as e:  # a crashing env must not kill training: count it, retry once
                counts["env_errors"] += 1
                logger.warning("env reset failed for task %s (attempt %d): %r", task_id, attempt + 1, e)
        else:
            logger.warning("task %s dropped from this iteration: its env would not reset", task_id)
            return None
        ep = SingleAgentEpisode()
        ep.add_env_reset(observation=obs, infos=info)
        ep.custom_data["opid"] = {"task_id": task_id, "group_id": group_id, "traj_id": f"{group_id}/{copy_idx}",
                                  "task": info.get("task", ""), "task_type": info.get("task_type", ""),
                                  "env_name": self.env_name, "won": False, "env_error": False}
        return {"env_idx": i, "env": env, "task_id": task_id, "episode": ep, "obs": obs, "info": info,
                "history": [], "done": False, "records": []}

    def _prompt_for(self, sl) -> str:
        s = self.settings
        info = sl["info"]
        prompt = build_prompt(self.env_name, task=info.get("task", ""), obs=sl["obs"], history=sl["history"],
                              admissible=list(info.get("admissible_actions", [])), step=len(sl["history"]),
                              history_length=s["history_length"])
        if s["skills_in_rollout_prompt"] and sl["task_id"] in self._skill_cache:
            prompt = insert_skills(prompt, episode_skill=self._skill_cache[sl["task_id"]])
        t = len(sl["history"])
        if sl.get("routes") and t < len(sl["routes"]):
            episode_skill, step_skill = sl["routes"][t]
            prompt = insert_skills(prompt, episode_skill=episode_skill, step_skill=step_skill)
        return prompt

    def _oracle_pass(self, live, prompts, gens, cut, temp, gen_seed, counts):
        """Insert, at every step, the step skill naming the env's expert next action in the hindsight
        analyzer's wording for the response just sampled (analyzer.oracle.oracle_step_skill), then
        sample again from the skill prompt and play that: the teacher OPID distils toward, acting.
        The hindsight analyzer's quote_sampled (default True) picks the wording, as it does the analyzer's."""
        from opid_rllib.analyzer.base import StepRecord
        from opid_rllib.analyzer.oracle import oracle_step_skill

        options = {**dict(self.settings["analyzer_config"] or {}), **dict(self.settings["hindsight_options"] or {})}
        quote = bool(options.get("quote_sampled", True))
        new_prompts = []
        for sl, prompt, gen in zip(live, prompts, gens):
            plan = sl["info"].get("expert_actions")
            if plan is None:
                raise ValueError(f"skills='oracle': env {self.env_name!r} gives no expert plan "
                                 "(info['expert_actions']); the oracle evaluation needs one")
            action, valid = project_action(self.env_name, gen.text)
            previous = [StepRecord(index=i, **r) for i, r in enumerate(sl["records"])]
            step = StepRecord(index=len(previous), observation=sl["obs"], response=gen.text, action=action,
                              action_valid=bool(valid),
                              admissible_actions=list(sl["info"].get("admissible_actions", [])),
                              expert_actions=list(plan))
            skill = oracle_step_skill(self.env_name, step, previous, quote_sampled=quote)
            new_prompts.append(insert_skills(prompt, step_skill=skill) if skill else prompt)
            counts["oracle_skill_steps"] += int(bool(skill))
        ids, cut = self.module.encode_prompts(new_prompts)
        counts["prompt_truncations"] += int(sum(cut))
        gens = self.module.generate(ids, temperature=temp, seed=None if gen_seed is None else gen_seed + 7919)
        return new_prompts, gens, cut

    def _step_slot(self, sl, prompt, gen, was_cut, counts):
        s = self.settings
        action, fmt_valid = project_action(self.env_name, gen.text)
        prev_obs, prev_info = sl["obs"], sl["info"]
        if not fmt_valid:
            counts["format_invalid_steps"] += 1
        elif is_inadmissible(action, prev_info.get("admissible_actions") or ()):
            counts["inadmissible_steps"] += 1  # well-formed, not a command the game offered (prompts/admissible.py)
        try:
            obs, reward, term, trunc, info = sl["env"].step(action)
        except Exception as e:  # counted; the episode ends here and keeps the GRPO signal it has
            counts["env_errors"] += 1
            obs, reward, term, trunc = ENV_ERROR_OBS, 0.0, False, True
            info = dict(prev_info, action_valid=False, env_error=repr(e)[:200])
            sl["episode"].custom_data["opid"]["env_error"] = True
            try:
                self._rebuild_env(sl["env_idx"])
            except Exception as e2:  # counted; the next reset of this slot tries again (and drops its task)
                counts["env_errors"] += 1
                logger.warning("env rebuild after a crash failed: %r", e2)
        if not (term or trunc) and len(sl["history"]) + 1 >= s["max_steps"]:
            trunc = True  # runner-side cap, in case env_config did not set max_steps
        n_max = s["max_new_tokens"]
        resp = np.full(n_max, int(self.module.pad_id), dtype=np.int64)
        logp = np.zeros(n_max, dtype=np.float32)
        n = min(len(gen.token_ids), n_max)
        resp[:n] = gen.token_ids[:n]
        logp[:n] = gen.logprobs[:n]
        sl["episode"].add_env_step(
            observation=obs, action=action, reward=float(reward), infos=info, terminated=bool(term),
            truncated=bool(trunc),
            extra_model_outputs={"prompt": prompt, "response_ids": resp, "response_len": n, "logp": logp,
                                 "response_text": gen.text, "format_valid": bool(fmt_valid),
                                 "prompt_truncated": bool(was_cut)})
        sl["records"].append({"observation": prev_obs, "response": gen.text, "action": action,
                              "action_valid": bool(fmt_valid), "reward": float(reward),
                              "admissible_actions": list(prev_info.get("admissible_actions", [])),
                              "expert_actions": list(prev_info.get("expert_actions", []) or [])})
        sl["history"].append((prev_obs, action))
        sl["obs"], sl["info"] = obs, info
        counts["steps"] += 1
        if term or trunc:
            sl["done"] = True
            sl["episode"].custom_data["opid"]["won"] = bool(info.get("won", False))
            sl["ground_truth"] = info.get("ground_truth", prev_info.get("ground_truth", {})) or {}

    def _should_analyze(self, sl) -> bool:
        return not (self.settings["failed_only"] and sl["episode"].custom_data["opid"]["won"])

    def _trajectory_record(self, sl):
        from opid_rllib.analyzer.base import StepRecord, TrajectoryRecord

        meta = sl["episode"].custom_data["opid"]
        rets = discounted_returns([r["reward"] for r in sl["records"]], self.settings["gamma"])
        steps = [StepRecord(index=i, ret=float(rets[i]), **r) for i, r in enumerate(sl["records"])]
        return TrajectoryRecord(traj_id=meta["traj_id"], group_id=meta["group_id"], task_id=meta["task_id"],
                                task=meta["task"], task_type=meta["task_type"], env_name=self.env_name,
                                success=bool(meta["won"]),
                                episode_reward=float(sum(r["reward"] for r in sl["records"])),
                                steps=steps, ground_truth=dict(sl.get("ground_truth", {})))

    def _log_sample_metrics(self, episodes, timers, counts, wall):
        m = self.metrics
        m.log_value(NUM_ENV_STEPS_SAMPLED, counts["steps"], reduce="sum")
        m.log_value(NUM_ENV_STEPS_SAMPLED_LIFETIME, counts["steps"], reduce="lifetime_sum")
        m.log_value(NUM_EPISODES, len(episodes), reduce="sum")
        m.log_value(NUM_EPISODES_LIFETIME, len(episodes), reduce="lifetime_sum")
        for k, v in timers.items():
            m.log_value(("opid_runner", k), v, reduce="sum")
        m.log_value(("opid_runner", "sample_wall_s"), wall, reduce="sum")
        m.log_value(("opid_runner", "env_errors"), counts["env_errors"], reduce="sum")
        m.log_value(("opid_runner", "prompt_truncations"), counts["prompt_truncations"], reduce="sum")
        for k in ("format_invalid_steps", "inadmissible_steps"):  # out of num_env_steps_sampled
            m.log_value(("opid_runner", k), counts[k], reduce="sum")
        if counts["oracle_skill_steps"]:
            m.log_value(("opid_runner", "oracle_skill_steps"), counts["oracle_skill_steps"], reduce="sum")
        pool, actor = self._analyzer_pool, self._analyzer_actor
        if pool is not None or actor is not None:  # the pool's counters are cumulative: log this call's share
            import ray

            now = pool.stats() if actor is None else ray.get(actor.stats.remote())
            for k, v in now.items():  # calls, errors, latency + the analyzer's own (requests, timeouts...)
                if k not in ("mean_latency_s", "pending"):
                    m.log_value(("analyzer", k), v - self._analyzer_last.get(k, 0), reduce="sum")
            self._analyzer_last = now
