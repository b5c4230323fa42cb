"""The GRPO baseline on exactly the setup of alfworld_opid_tiny_cpu.py (no analyzer, no skill term)."""

import os
import sys

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import CPU_TINY, apply_preset, cpu_example_settings

config = apply_preset(
    OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": CPU_TINY["max_steps"]}),
    "grpo", **dict(cpu_example_settings("alfworld"), llm_model=os.environ.get("OPID_MODEL", "tiny")))

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, sys.argv[1:]))
