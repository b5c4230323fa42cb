"""Reference scale, WebShop (run_webshop_opid_guide_qwen3.sh): 16 x 8, 15 steps, history 2, prompt 4096.

Set WEBSHOP_URL to drive a running WebShop server; otherwise the built-in offline shop is used.
"""

import os
import sys

from tuned_examples._reference_scale import reference_config

config = reference_config("webshop", os.environ.get("OPID_MODEL", "Qwen/Qwen3-1.7B"), max_steps=15,
                          history_length=2, max_prompt_len=4096, max_step_skills=5, outcome_adv_norm="mean",
                          micro_batch_size=8)
if os.environ.get("WEBSHOP_URL"):
    config.env_config["server_url"] = os.environ["WEBSHOP_URL"]

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
