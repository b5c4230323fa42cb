"""Ray Tune grid over the episode- and step-skill advantage weights (the paper's main knob).

    python tuned_examples/alfworld_opid_weight_sweep.py --stop-iters 10 --output runs/sweep
    tensorboard --logdir runs/sweep

The reference scripts use 0.001 for both; the grid brackets it by decades, and 0 switches a term off.
"""

import os
import sys

from ray import tune

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import CPU_TINY, apply_preset

config = apply_preset(
    OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": CPU_TINY["max_steps"]}),
    "opid", **dict(CPU_TINY, llm_model=os.environ.get("OPID_MODEL", "tiny")))
config.episode_skill_adv_weight = tune.grid_search([0.0, 0.001, 0.01])
config.step_skill_adv_weight = tune.grid_search([0.0, 0.001, 0.01])

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
