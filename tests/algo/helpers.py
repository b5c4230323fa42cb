"""Small builders shared by the algorithm tests (real env, real tiny model, real RLlib pieces)."""

from __future__ import annotations

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import apply_settings


def tiny_config(env: str = "searchqa", **overrides) -> OPIDConfig:
    """A CPU-sized OPID config on a fast offline env."""
    settings = dict(llm_model="tiny", max_new_tokens=12, max_prompt_len=512, history_length=2, max_steps=3,
                    group_size=2, tasks_per_iter=2, micro_batch_size=8, score_micro_batch_size=8,
                    analyzer_num_workers=2, episode_skill_adv_weight=0.1, step_skill_adv_weight=0.1)
    settings.update(overrides)
    settings.setdefault("lr", 1e-5)
    cfg = OPIDConfig().environment(env, env_config={"max_steps": settings["max_steps"]})
    return apply_settings(cfg, **settings).debugging(seed=0)


def rollouts_and_module(**overrides):
    """Real grouped rollouts of 2 searchqa tasks x 2 copies and a fresh module: the inputs of the learner
    connector pipeline. max_prompt_len fits every skill prompt of these rollouts."""
    from envs.base import text_space
    from opid_rllib.env_runner import GroupedTextEnvRunner
    from opid_rllib.rl_module import LLMRLModule

    cfg = tiny_config(**{**dict(group_size=2, tasks_per_iter=2, max_steps=3, max_step_skills_per_traj=1,
                                max_prompt_len=2048), **overrides})
    runner = GroupedTextEnvRunner(config=cfg)
    episodes = runner.sample_groups(list(runner._make_env(0).task_ids()[:2]), seed=3)
    runner.stop()
    module = LLMRLModule(observation_space=text_space(), action_space=text_space(), model_config=cfg.model_config)
    return cfg, episodes, module


def scalar_steps(run_dir, tag) -> list[int]:
    """The steps of a TensorBoard scalar as TensorBoard shows them (orphaned events purged)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]
