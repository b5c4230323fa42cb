"""OPID on offline ALFWorld with the tiny model: the nanoGPT-sized run for a laptop CPU.

    python tuned_examples/alfworld_opid_tiny_cpu.py --stop-iters 5 [--no-tune] [--output DIR]

What `opid-train --env alfworld --cpu-example` runs: six fixed games, from the warm start of
`opid-sft --env alfworld --cpu-example --out sft/` (--model sft/, or OPID_MODEL=sft/).
"""

import os
import sys

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import CPU_TINY, apply_preset, cpu_example_settings

config = apply_preset(
    OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": CPU_TINY["max_steps"]}),
    "opid", **dict(cpu_example_settings("alfworld"), llm_model=os.environ.get("OPID_MODEL", "tiny")))

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
