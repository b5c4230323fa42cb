"""Reference scale, ALFWorld, Qwen2.5-3B-Instruct, as run_alfworld_opid_guide.sh (mean_std outcome norm).

    python -m tuned_examples.alfworld_opid_qwen2_5_3b_gpu --stop-iters 160 --checkpoint-freq 10
"""

import os
import sys

from tuned_examples._reference_scale import reference_config, use_official_alfworld

config = reference_config("alfworld", os.environ.get("OPID_MODEL", "Qwen/Qwen2.5-3B-Instruct"), max_steps=30,
                          history_length=5, max_prompt_len=2048, max_step_skills=5, outcome_adv_norm="mean_std",
                          micro_batch_size=4)
if os.environ.get("ALFWORLD_DATA"):
    use_official_alfworld(config, os.environ["ALFWORLD_DATA"])

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
