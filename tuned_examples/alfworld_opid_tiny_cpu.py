"""OPID on offline ALFWorld with the tiny model: the nanoGPT-sized run for a laptop CPU.

    python tuned_examples/alfworld_opid_tiny_cpu.py --stop-iters 5 [--no-tune] [--output DIR]

Start from an SFT'd tiny model (opid-sft) for non-zero success: --model-path DIR via OPID_MODEL.
"""

import os
import sys

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import CPU_TINY, apply_preset

config = apply_preset(
    OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": CPU_TINY["max_steps"]}),
    "opid", **dict(CPU_TINY, llm_model=os.environ.get("OPID_MODEL", "tiny")))

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
