"""OPIDConfig + OPID: the algorithm's typed settings and its training step.

training_step (mirrors RLlib's PPO):
  1. sample `tasks_per_iter` tasks; every env runner plays its share as groups of
     `group_size` copies (analysis runs inside the runners, overlapped with the rollout);
  2. learner update on whole groups per learner (the connector pipeline: outcome advantage, step samples,
     skill prompts, re-scoring, combined advantage; connectors/);
  3. weight sync to the env runners; metrics and skill dumps (the routes the learner trained).
With rollout_staleness > 0 the runners sample the next batch during step 2 (pipeline.py).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from opid_rllib.progress import iteration_heartbeat
from opid_rllib.quiet import silence_ray_notices
from opid_rllib.connectors.combine import pop_trained_routes
from opid_rllib.groups import log_rollout_metrics, shard_by_group
from opid_rllib.resume import RESUME_STATE, ResumeStateMixin, _learner_rank  # noqa: F401 (re-exported)
# ANALYZERS is re-exported for callers that take the algorithm's names from here.
from opid_rllib.settings import ANALYZERS, EXPERIMENTAL_SETTINGS, OPID_DEFAULTS, RLLIB_TRAINING_KEYS  # noqa: F401

silence_ray_notices()  # RLlib's new-API-stack notice, its RLModuleConfig deprecation, Tune's gputil hint (quiet.py)


class OPIDConfig(AlgorithmConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or OPID)
        for k, (v, _) in OPID_DEFAULTS.items():
            setattr(self, k, dict(v) if isinstance(v, dict) else v)
        self.lr = 1e-6
        self.gamma = 0.95
        self.grad_clip = 1.0
        self.grad_clip_by = "global_norm"
        self.num_epochs = 1
        # Step-samples per optimizer step (RLlib's name for the reference's ppo_mini_batch_size: 256 ALFWorld,
        # 64 WebShop, 512 Search); None = one step on the whole batch per iteration.
        self.minibatch_size = None
        self.env = "alfworld"
        self.num_env_runners = 0
        self.add_default_connectors_to_learner_pipeline = False
        self.add_default_connectors_to_env_to_module_pipeline = False
        self.add_default_connectors_to_module_to_env_pipeline = False
        from opid_rllib.env_runner import GroupedTextEnvRunner

        self.env_runner_cls = GroupedTextEnvRunner

    # ---- builder methods ----------------------------------------------------------------
    # The paper's settings go through .training(), .llm(), .analyzer_settings() and .evaluation() (any of them takes
    # any of OPID_DEFAULTS' names); research settings (settings.EXPERIMENTAL_SETTINGS) only through .experimental().
    def _set(self, builder: str, kw: dict) -> "OPIDConfig":
        for k, v in kw.items():
            if v is NotProvided:
                continue
            if k not in OPID_DEFAULTS and k not in RLLIB_TRAINING_KEYS:
                raise TypeError(f"{builder}({k}=...): unknown OPID setting; see opid_rllib/settings.py")
            if (k in EXPERIMENTAL_SETTINGS) != (builder == "experimental"):
                raise TypeError(_wrong_builder(builder, k))
            setattr(self, k, v)
        return self

    def training(self, **kw) -> "OPIDConfig":
        """RLlib's training settings (lr, minibatch_size, num_epochs, grad_clip, gamma, ...) and OPID's (the loss,
        the advantage, groups)."""
        ours = {k: kw.pop(k) for k in list(kw) if k in OPID_DEFAULTS or k in EXPERIMENTAL_SETTINGS}
        self._set("training", ours)  # first: a research setting is refused before anything is set
        super().training(**kw)
        return self

    def experimental(self, **kw) -> "OPIDConfig":
        """Settings not in the paper (settings.EXPERIMENTAL_SETTINGS): research plug-ins and controls
        (opid_rllib/experimental/)."""
        return self._set("experimental", kw)

    def llm(self, **kw) -> "OPIDConfig":
        """Model and rollout settings: llm_model, dtype, generation_backend, max_new_tokens, temperature, ..."""
        return self._set("llm", kw)

    def evaluation(self, *, eval_panel=NotProvided, eval_task_ids=NotProvided, eval_seed=NotProvided,
                   eval_batch_envs=NotProvided, eval_fresh_seeds=NotProvided, eval_final_iteration=NotProvided,
                   **kw) -> "OPIDConfig":
        """RLlib's evaluation settings (evaluation_interval, evaluation_duration in episodes,
        evaluation_num_env_runners, evaluation_parallel_to_training, ...) plus what to play (evaluation.py)."""
        super().evaluation(**kw)
        return self._set("evaluation", dict(eval_panel=eval_panel, eval_task_ids=eval_task_ids, eval_seed=eval_seed,
                                            eval_batch_envs=eval_batch_envs, eval_fresh_seeds=eval_fresh_seeds,
                                            eval_final_iteration=eval_final_iteration))

    def get_evaluation_config_object(self):
        eval_cfg = super().get_evaluation_config_object()
        if eval_cfg is not None and eval_cfg.custom_evaluation_function is None:
            from opid_rllib.evaluation import apply_to_evaluation_config

            apply_to_evaluation_config(eval_cfg)  # the panel's env, no analyzer, no skills
        return eval_cfg

    def analyzer_settings(self, **kw) -> "OPIDConfig":
        """analyzer (hindsight|openai|none), analyzer_config, analyzer_num_workers, ..."""
        return self._set("analyzer_settings", kw)

    def get_state(self) -> dict:
        """RLlib's state drops every value equal to its DEPRECATED_VALUE (-1), so build_algo's copy of a config would
        turn e.g. entropy_coeff=-1 back into the default instead of refusing it: OPID's settings are kept as set."""
        state = super().get_state()
        state.update({k: getattr(self, k) for k in OPID_DEFAULTS if k not in state})
        return state

    # ---- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        super().validate()
        from opid_rllib.config_checks import config_errors

        errors = config_errors(self)
        if errors:
            raise ValueError("Invalid OPIDConfig:\n  " + "\n  ".join(errors))

    # ---- what the RLlib machinery asks for ---------------------------------------------
    @property
    def _model_config_auto_includes(self) -> dict[str, Any]:
        from opid_rllib.models import resolve_model
        from opid_rllib.prompts import action_stop_strings

        # Generation stops after the env's closing action tag unless backend_kwargs sets "stop".
        backend_kwargs = {"stop": list(action_stop_strings(self.env)), **self.backend_kwargs}
        # The spec travels too: a node that does not see the driver's folder resolves it into its own cache.
        return {"model_path": str(resolve_model(self.llm_model)), "model_spec": str(self.llm_model),
                "dtype": self.dtype,
                "generation_backend": self.generation_backend, "backend_kwargs": backend_kwargs,
                "max_new_tokens": self.max_new_tokens, "max_prompt_len": self.max_prompt_len,
                "temperature": self.temperature, "top_p": self.top_p, "enable_thinking": self.enable_thinking,
                "gradient_checkpointing": self.gradient_checkpointing,
                "score_micro_batch_size": self.score_micro_batch_size, "torch_threads": self.torch_threads,
                "lora": dict(self.lora) if self.lora else None}

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from envs.base import text_space
        from opid_rllib.rl_module import LLMRLModule

        return RLModuleSpec(module_class=LLMRLModule, observation_space=text_space(), action_space=text_space())

    def get_default_learner_class(self):
        from opid_rllib.learner import OPIDTorchLearner

        return OPIDTorchLearner

    def build_learner_connector(self, input_observation_space, input_action_space, device=None):
        from ray.rllib.connectors.learner import LearnerConnectorPipeline

        return LearnerConnectorPipeline(connectors=learner_connectors(self, device=device),
                                        input_observation_space=input_observation_space,
                                        input_action_space=input_action_space)

    def opid_runner_settings(self) -> dict[str, Any]:
        keys = ("group_size", "tasks_per_iter", "temperature", "eval_temperature", "history_length", "max_steps",
                "max_new_tokens", "analyzer", "analyzer_config", "analyzer_num_workers", "max_step_skills_per_traj",
                "failed_only", "hindsight_options", "skills_in_rollout_prompt", "gamma")
        return {k: getattr(self, k) for k in keys}


class OPID(ResumeStateMixin, Algorithm):
    @classmethod
    def get_default_config(cls) -> OPIDConfig:
        return OPIDConfig()

    def _setup_logdir(self) -> None:
        """Outside Tune, Trainable makes an empty ~/ray_results/<date> folder; a run_dir (--no-tune) serves instead."""
        if self._storage is not None or not getattr(self.config, "run_dir", None):
            return super()._setup_logdir()
        self._logdir = os.path.abspath(self.config.run_dir)
        os.makedirs(self._logdir, exist_ok=True)

    def setup(self, config) -> None:
        super().setup(config)
        import envs

        cfg = self.config
        probe = envs.make(cfg.env, **dict(cfg.env_config))
        ids = list(probe.task_ids())
        probe.close()
        rng = np.random.default_rng(cfg.seed if cfg.seed is not None else 0)
        if cfg.train_task_ids is not None:  # a fixed set named by the user (the learning gate's games)
            unknown = sorted(set(cfg.train_task_ids) - set(ids))
            if unknown:
                raise ValueError(f"train_task_ids: {len(unknown)} not among env {cfg.env!r}'s tasks "
                                 f"(split {dict(cfg.env_config).get('split', 'train')!r}), e.g. {unknown[0]!r}")
            ids = list(cfg.train_task_ids)
        self._train_task_ids = ids
        self._task_rng = rng
        from opid_rllib.pipeline import RolloutPipeline

        self._pipeline = RolloutPipeline(self) if cfg.rollout_staleness > 0 else None

    def policy_tokenizer(self):
        """The policy's tokenizer on the driver (the content-free control counts skill tokens with it)."""
        if getattr(self, "_driver_tokenizer", None) is None:
            from transformers import AutoTokenizer

            from opid_rllib.models import resolve_model

            self._driver_tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(self.config.llm_model)))
        return self._driver_tokenizer

    def _run_dir(self) -> str:
        """Where skill dumps go: config.run_dir, else the Tune trial's own directory when it is on the
        local filesystem (Tune's artifact sync copies the working dir only at some checkpoints)."""
        if self.config.run_dir:
            return self.config.run_dir
        storage = getattr(self, "_storage", None)
        if storage is not None:
            import pyarrow.fs

            if isinstance(storage.storage_filesystem, pyarrow.fs.LocalFileSystem):
                return storage.trial_fs_path
        return self.logdir

    # ---- the training step --------------------------------------------------------------
    def training_step(self) -> None:
        with iteration_heartbeat(self) as beat:  # a progress line every progress_interval_s (progress.py)
            self._training_step(beat)

    def _draw_tasks(self) -> list:
        """The next batch's task ids (the task stream, one draw per batch)."""
        ids = self._train_task_ids
        return [ids[int(i)] for i in self._task_rng.integers(len(ids), size=self.config.tasks_per_iter)]

    def _training_step(self, beat) -> None:
        if self._pipeline is not None:  # rollout_staleness > 0: sampling overlaps the update (pipeline.py)
            from opid_rllib.pipeline import pipelined_step

            # no weight sync: the next launch carries the weights
            pipelined_step(self, beat, self._draw_tasks, lambda eps: self._dump_skills(eps, self._learn(eps, beat)))
            return
        tasks = self._draw_tasks()
        n_remote = self.env_runner_group.num_remote_env_runners()
        beat.phase("rollouts and analysis" + (f" on {n_remote} remote runners" if n_remote else ""))
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, runner_metrics = self._sample(tasks)
            self.metrics.aggregate(runner_metrics, key=ENV_RUNNER_RESULTS)
        if not episodes:
            return
        trained_routes = self._learn(episodes, beat)
        beat.phase("weight sync")
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner_group,
                                               inference_only=True)
        self._dump_skills(episodes, trained_routes)

    def _learn(self, episodes, beat) -> dict:
        """The learner update on one batch (controls, rollout metrics, the update); the routes it trained."""
        cfg = self.config
        beat.phase("learner update (re-scoring, then the policy update)")
        if cfg.shuffle_skills or cfg.content_free_skills:  # the skill controls' one hook (experimental/controls.py)
            from opid_rllib.experimental.controls import apply_controls

            apply_controls(self, episodes)
        log_rollout_metrics(self.metrics, episodes)
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results = self.learner_group.update(
                training_data=self._training_data(episodes),
                timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                    (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)},
                num_epochs=cfg.num_epochs)
            trained_routes = pop_trained_routes(learner_results)
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
        return trained_routes

    # ---- validation (evaluation.py) ------------------------------------------------------
    def evaluate(self, parallel_train_future=None) -> dict:
        """Play the evaluation games without analyzer or skills, with the learner's current weights; the results land
        under `evaluation/` (evaluation.run_evaluation; a custom_evaluation_function keeps RLlib's path)."""
        if self.config.custom_evaluation_function:
            return super().evaluate(parallel_train_future=parallel_train_future)
        from opid_rllib.evaluation import run_evaluation

        with iteration_heartbeat(self, "evaluation", phase=f"playing {self.config.evaluation_duration} games"):
            results, self.last_evaluation_episodes = run_evaluation(self)  # episodes: opid-eval's records
        self._last_evaluation = results
        return results

    def step(self) -> dict:
        """RLlib's step, plus: the sampling engine's name; the run's last iteration (eval_final_iteration) is
        evaluated too, and an iteration without evaluation carries the latest one (as RLlib's metrics carry its
        own), so `evaluation/...` can be a Tune metric from the first evaluation on; `evaluated_at_iteration` says
        when it was measured."""
        results = super().step()
        cfg = self.config
        results["generation_backend"] = cfg.generation_backend   # which engine sampled (a string: TensorBoard skips it)
        results["sharding"] = cfg.sharding  # how the learners held the policy ("none" | "fsdp")
        if cfg.custom_evaluation_function or not cfg.evaluation_interval:
            return results
        if "evaluation" not in results and cfg.eval_final_iteration == self.iteration + 1:
            results["evaluation"] = self.evaluate()
        elif "evaluation" not in results and getattr(self, "_last_evaluation", None):
            results["evaluation"] = dict(self._last_evaluation)
        return results

    def _sample(self, tasks):
        group = self.env_runner_group
        n_remote = group.num_remote_env_runners()
        if n_remote == 0:
            eps = group.local_env_runner.sample_groups(tasks)
            return eps, [group.local_env_runner.get_metrics()]
        shards = [tasks[i::n_remote] for i in range(n_remote)]
        funcs = [(lambda r, s=s: r.sample_groups(s) if s else []) for s in shards]
        results = group.foreach_env_runner(funcs, local_env_runner=False)
        metrics = group.foreach_env_runner(lambda r: r.get_metrics(), local_env_runner=False)
        return [e for eps in results for e in eps], metrics

    def _training_data(self, episodes) -> TrainingData:
        n = max(1, self.config.num_learners)
        if n == 1:
            return TrainingData(episodes=episodes)
        return TrainingData(episodes_refs=[ray.put(s) for s in shard_by_group(episodes, n)])

    def _dump_skills(self, episodes, trained_routes: dict) -> None:
        from opid_rllib.report.skills import teacher_diagnostics, write_skill_dump

        peek = lambda *key: self.metrics.peek((LEARNER_RESULTS, "opid", *key), default=None)  # noqa: E731
        write_skill_dump(self._run_dir(), episodes, iteration=self.iteration + 1, routes=trained_routes,
                         teacher_diagnostics=teacher_diagnostics(peek))


def learner_connectors(cfg, device=None) -> list:
    """The learner connector pipeline for `cfg`: the paper's pieces (connectors/) with the research plug-ins it
    switches on (experimental/; none for the paper's OPID and its baselines)."""
    from opid_rllib.connectors import opid_learner_connectors
    from opid_rllib.experimental import plugins

    return opid_learner_connectors(cfg, device=device, plugins=plugins(cfg))


def _wrong_builder(builder: str, key: str) -> str:
    """The one-line pointer for a setting given to the wrong builder."""
    if builder == "experimental":
        return (f"experimental({key}=...): not an experimental setting; set it with .training(), .llm() or "
                f".analyzer_settings() (research settings: {', '.join(sorted(EXPERIMENTAL_SETTINGS))})")
    return (f"{builder}({key}=...): not in the paper; set it with OPIDConfig().experimental({key}=...) "
            f"({EXPERIMENTAL_SETTINGS[key]})")


def _register_with_tune() -> None:
    from ray.tune.registry import register_trainable

    register_trainable("OPID", OPID)


_register_with_tune()
