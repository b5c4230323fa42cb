"""Reference scale, WebShop with Qwen2.5-7B-Instruct (the reference's 7B WebShop run) trained through
LoRA adapters: 16 x 8, 15 steps, history 2, prompt 4096. Full fine-tuning a 7B model needs ~16 B/param of
fp32 master weights, grads and AdamW state (122 GB): LoRA keeps the bf16 base frozen and trains ~1 % of
that, and the KL reference is the base with the adapters switched off (no second copy).

    python -m opid_rllib.memory_plan tuned_examples/webshop_opid_qwen2_5_7b_lora_gpu.py   # memory per GPU
    python -m tuned_examples.webshop_opid_qwen2_5_7b_lora_gpu --stop-iters 160 --checkpoint-freq 10
"""

import os
import sys

from tuned_examples._reference_scale import reference_config

from opid_rllib.algorithm import OPID_DEFAULTS

# r 64 / alpha 128 on every linear of every layer: our choice (the reference fine-tunes fully).
LORA = {"r": 64, "alpha": 128,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}

config = reference_config("webshop", os.environ.get("OPID_MODEL", "Qwen/Qwen2.5-7B-Instruct"), max_steps=15,
                          history_length=2, max_prompt_len=4096, max_step_skills=5, outcome_adv_norm="mean",
                          micro_batch_size=16)
if "lora" in OPID_DEFAULTS:  # the learner's LoRA setting; the memory plan reads LORA either way
    config.llm(lora=LORA)
if os.environ.get("WEBSHOP_URL"):
    config.env_config["server_url"] = os.environ["WEBSHOP_URL"]

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
