"""Small builders shared by the algorithm tests (real env, real tiny model, real RLlib pieces)."""

from __future__ import annotations

from opid_rllib.algorithm import OPIDConfig


def tiny_config(env: str = "searchqa", **overrides) -> OPIDConfig:
    """A CPU-sized OPID config on a fast offline env."""
    settings = dict(llm_model="tiny", max_new_tokens=12, max_prompt_len=512, history_length=2, max_steps=3,
                    group_size=2, tasks_per_iter=2, micro_batch_size=8, score_micro_batch_size=8,
                    analyzer_num_workers=2, episode_skill_adv_weight=0.1, step_skill_adv_weight=0.1)
    settings.update(overrides)
    lr = settings.pop("lr", 1e-5)
    cfg = OPIDConfig().environment(env, env_config={"max_steps": settings["max_steps"]})
    cfg._set(**settings)
    cfg.lr = lr
    return cfg.debugging(seed=0)
