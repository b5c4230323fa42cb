"""Reference scale, ALFWorld, Qwen3-1.7B (thinking off), as run_alfworld_opid_guide_qwen3.sh: 16 tasks x 8,
30 steps, history 5, prompt 2048, mean_norm outcome advantage, 5 step skills, vLLM rollout, 8 GPUs.

    export OPENAI_API_KEY=... OPENAI_BASE_URL=... OPENAI_MODEL=...   # the analyzer
    export ALFWORLD_DATA=/path/to/json_2.1.1                          # optional: official games
    python -m tuned_examples.alfworld_opid_qwen3_1_7b_gpu --stop-iters 160 --checkpoint-freq 10
"""

import os
import sys

from tuned_examples._reference_scale import reference_config, use_official_alfworld

config = reference_config("alfworld", os.environ.get("OPID_MODEL", "Qwen/Qwen3-1.7B"), max_steps=30,
                          history_length=5, max_prompt_len=2048, max_step_skills=5, outcome_adv_norm="mean",
                          micro_batch_size=16)
if os.environ.get("ALFWORLD_DATA"):
    use_official_alfworld(config, os.environ["ALFWORLD_DATA"])

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
