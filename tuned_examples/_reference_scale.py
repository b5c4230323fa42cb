"""Shared reference-scale settings (opid_reference.md section 6) for the GPU recipes.

micro_batch_size only sets how many rows share one forward/backward (the update is the same); each
recipe picks the largest power of two that `python -m opid_rllib.memory_plan RECIPE` fits on an 80 GiB
card with every row at full length and >= 5 GiB to spare (docs/GPU.md).
"""

from opid_rllib.algorithm import OPIDConfig

REFERENCE_MINI_BATCH = {"alfworld": 256, "webshop": 64, "searchqa": 512}
# In-training validation as the reference's scripts: every test_freq=5 iterations, at temperature 0.4, on 128
# valid_seen games (ALFWorld; the generated panel has 72) or the test set (WebShop; Search plays 512). The training
# runners play it (evaluation.py), so it needs no GPU of its own; results under evaluation/ in TensorBoard.
VALIDATION = {"alfworld": ("alfworld/valid_seen@v1", 128), "webshop": ("webshop/test@v1", 128),
              "searchqa": ("searchqa/test@v1", 512)}
TEST_FREQ = 5


def reference_config(env: str, model: str, *, max_steps: int, history_length: int, max_prompt_len: int,
                     max_step_skills: int, outcome_adv_norm: str, kl_coeff: float = 0.01,
                     entropy_coeff: float = 0.001, invalid_action_penalty: float = 0.1,
                     tasks_per_iter: int = 16, num_gpus: int = 8,
                     micro_batch_size: int = 32, ppo_mini_batch_size: int | None = None) -> OPIDConfig:
    cfg = OPIDConfig().environment(env, env_config={"split": "train", "max_steps": max_steps})
    cfg.llm(llm_model=model, dtype="bfloat16", generation_backend="vllm",
            backend_kwargs={"gpu_memory_utilization": 0.6, "max_model_len": max_prompt_len + 512},
            max_new_tokens=512, max_prompt_len=max_prompt_len, temperature=1.0, eval_temperature=0.4,
            history_length=history_length, max_steps=max_steps, gradient_checkpointing=True)
    cfg.training(group_size=8, tasks_per_iter=tasks_per_iter, lr=1e-6, outcome_adv_norm=outcome_adv_norm,
                 episode_skill_adv_weight=0.001, step_skill_adv_weight=0.001, skill_routing="critical_first",
                 max_step_skills_per_traj=max_step_skills, kl_coeff=kl_coeff, entropy_coeff=entropy_coeff,
                 invalid_action_penalty=invalid_action_penalty, micro_batch_size=micro_batch_size, gamma=0.95)
    # The reference's analyzer: any OpenAI-compatible endpoint (OPENAI_API_KEY / OPENAI_BASE_URL /
    # OPENAI_MODEL from the environment), 128 concurrent calls.
    cfg.analyzer_settings(analyzer="openai", analyzer_num_workers=128,
                          analyzer_config={"max_completion_tokens": 4096})
    half = max(1, num_gpus // 2)
    # The reference's ppo_mini_batch_size (step-samples per optimizer step, all GPUs together: ALFWorld 256,
    # WebShop 64, Search 512); RLlib's minibatch_size is per learner.
    mini = ppo_mini_batch_size or REFERENCE_MINI_BATCH[env]
    cfg.training(minibatch_size=max(1, mini // half))
    cfg.learners(num_learners=half, num_gpus_per_learner=1)
    cfg.env_runners(num_env_runners=half, num_gpus_per_env_runner=1)
    panel, episodes = VALIDATION[env]
    cfg.evaluation(evaluation_interval=TEST_FREQ, evaluation_duration=episodes, eval_panel=panel)
    return cfg


def use_official_alfworld(cfg, data_dir: str) -> None:
    """Train on the official ALFWorld games under `data_dir` (json_2.1.1) and validate on their valid_seen split
    (the generated panel's games are not there). A folder without them (`import alfworld` sets $ALFWORLD_DATA to
    its empty cache) changes nothing."""
    from pathlib import Path

    from envs.alfworld.env import _has_official_split

    if not _has_official_split(Path(data_dir), "train"):
        return
    cfg.env_config["data_dir"] = data_dir
    cfg.evaluation(eval_panel=None, evaluation_config={"env_config": {**cfg.env_config, "split": "valid_seen"}})
