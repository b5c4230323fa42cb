"""Ray Tune grid over the episode- and step-skill advantage weights (the paper's main knob).

    python tuned_examples/alfworld_opid_weight_sweep.py --stop-iters 10 --output runs/sweep
    python tuned_examples/alfworld_opid_weight_sweep.py --weight-grid 0.01,0.1 --model runs/base \\
        --max-steps 15 --stop-iters 4 --output runs/sweep        # a 2 x 2 grid from a warm-started base
    tensorboard --logdir runs/sweep

The reference scripts use 0.001 for both; the default grid brackets it by decades, and 0 switches a term off.
`--weight-grid` sets the values both weights take (the grid is their product). Any opid-train flag given
(`--model`, `--max-steps`, `--lr`, ...) overrides the CPU sizes below. When the sweep ends, its points are
ranked by training success averaged over iterations (OUTPUT/sweep.json; ties are reported as ties), or, with
`--select-panel alfworld/valid_seen@v1`, by each point's final policy on that held-out panel (the unseen panel
results are reported on is refused):

    python tuned_examples/alfworld_opid_weight_sweep.py --weight-grid 0.01,0.1 --model runs/base \
        --select-panel alfworld/valid_seen@v1 --select-max-steps 30 --output runs/sweep
"""

import argparse
import os
import sys

from ray import tune

from opid_rllib.algorithm import OPIDConfig
from opid_rllib.presets import CPU_TINY, apply_preset

DEFAULT_GRID = (0.0, 0.001, 0.01)


def parse_grid(text: str) -> list[float]:
    """'0,0.001,0.01' -> [0.0, 0.001, 0.01]; a clear error for anything else."""
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"--weight-grid {text!r}: give comma-separated numbers, e.g. 0,0.001,0.01") from None
    if not vals or any(v < 0 for v in vals):
        raise SystemExit(f"--weight-grid {text!r}: give one or more weights >= 0, e.g. 0,0.001,0.01")
    return vals


def sweep_args(argv: list[str]) -> tuple[list[float], list[str]]:
    """This example's own flag (--weight-grid) and the rest, which opid-train's parser reads."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--weight-grid", default=",".join(str(v) for v in DEFAULT_GRID))
    own, rest = p.parse_known_args(argv)
    return parse_grid(own.weight_grid), rest


grid, _rest = sweep_args(sys.argv[1:] if __name__ == "__main__" else [])
config = apply_preset(
    OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": CPU_TINY["max_steps"]}),
    "opid", **dict(CPU_TINY, llm_model=os.environ.get("OPID_MODEL", "tiny")))
config.episode_skill_adv_weight = tune.grid_search(grid)
config.step_skill_adv_weight = tune.grid_search(grid)

if __name__ == "__main__":
    from opid_rllib.cli.train import run_experiment

    sys.exit(run_experiment(config, _rest))
