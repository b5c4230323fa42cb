"""Reference scale, search QA (run_search_opid_guide.sh): 128 questions x 8, 4 turns, 2 step skills,
KL 0.001, no entropy bonus, invalid-action penalty 0.01.

Set RETRIEVER_URL to a Search-R1 retriever (e5 over wiki-18); otherwise the built-in BM25 server is used.
"""

import os
import sys

from tuned_examples._reference_scale import reference_config

config = reference_config("searchqa", os.environ.get("OPID_MODEL", "Qwen/Qwen2.5-3B-Instruct"), max_steps=4,
                          history_length=4, max_prompt_len=4096, max_step_skills=2, outcome_adv_norm="mean_std",
                          kl_coeff=0.001, entropy_coeff=0.0, invalid_action_penalty=0.01, tasks_per_iter=128,
                          micro_batch_size=4)
if os.environ.get("RETRIEVER_URL"):
    config.env_config["retriever_url"] = os.environ["RETRIEVER_URL"]

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
