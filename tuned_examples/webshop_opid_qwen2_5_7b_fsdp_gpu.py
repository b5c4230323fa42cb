"""Reference scale, WebShop with Qwen2.5-7B-Instruct fully fine-tuned (as the reference trains it): 16 x 8, 15 steps,
history 2, prompt 4096, on 8 x 80 GiB GPUs. The 4 learners shard the policy with FSDP2 (sharding="fsdp"): each holds
a quarter of the fp32 masters, gradients and AdamW state (16 B/param whole: 113 GiB, more than one card) and
gathers one decoder block at a time; the other 4 GPUs serve vLLM samplers.

    python -m opid_rllib.memory_plan tuned_examples/webshop_opid_qwen2_5_7b_fsdp_gpu.py   # memory per GPU
    python -m tuned_examples.webshop_opid_qwen2_5_7b_fsdp_gpu --stop-iters 160 --checkpoint-freq 10
"""

import os
import sys

from tuned_examples._reference_scale import reference_config

config = reference_config("webshop", os.environ.get("OPID_MODEL", "Qwen/Qwen2.5-7B-Instruct"), max_steps=15,
                          history_length=2, max_prompt_len=4096, max_step_skills=5, outcome_adv_norm="mean",
                          micro_batch_size=2)
config.llm(sharding="fsdp")
if os.environ.get("WEBSHOP_URL"):
    config.env_config["server_url"] = os.environ["WEBSHOP_URL"]

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
