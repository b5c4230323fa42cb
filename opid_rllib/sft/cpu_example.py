"""The warm start `opid-train --env alfworld --cpu-example` trains from (`opid-sft --env alfworld --cpu-example`).

The tiny model behaviour-cloned on the expert's play of the CPU example's six ALFWorld games
(the panel alfworld/cpu_example@v1): 8 plays of each with 20 % deviations the expert recovers from, half of them with skills
in the analyzer's wording, 14 epochs (about 10 min on 2 cores, cached). It is the learning gate's rung-1 base
(tuned_examples/alfworld_rung1.py): it wins about 40 % of those games at the training temperature, which RL raises.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from envs.alfworld.panels import CPU_EXAMPLE_GAMES

WARM_START = dict(repeats=8, epochs=14, lr=3e-3, batch_size=8, seed=0, skill_fraction=0.5, deviation_prob=0.2,
                  step_skill_wording="analyzer")
# The demonstrations' prompts: the rung-1 runs' history, step cap and prompt length.
DEMO_SETTINGS = dict(history_length=2, max_steps=12, max_prompt_len=1024)
ENV_CONFIG = {"split": "train"}


def warm_start(cache_dir: str | os.PathLike | None = None, progress_every_s: float | None = None,
               **changes) -> Path:
    """The base, built once into the model cache (its folder is returned). `changes` replace WARM_START's entries
    (and `model`, `dtype`: another base model); `progress_every_s`: progress lines of the build (default: none for
    the tiny model)."""
    from opid_rllib.models import resolve_model
    from opid_rllib.models.cache import _build_cached, default_cache_dir
    from opid_rllib.sft.demos import collect_demonstrations
    from opid_rllib.sft.train import train_sft

    ws = dict(WARM_START, **changes)
    # the tiny base's key (its cache folder) predates these two settings, so they join it only when set
    model = resolve_model(ws.pop("model", "tiny"))
    dtype = ws.pop("dtype", "float32")
    extra = {} if dtype == "float32" else {"dtype": dtype}
    games = list(CPU_EXAMPLE_GAMES)
    demos = collect_demonstrations(  # deviations make the expert recover from a wrong command, as RL rollouts need
        "alfworld", task_ids=games * ws["repeats"], num_tasks=len(games) * ws["repeats"],
        history_length=DEMO_SETTINGS["history_length"], max_steps=DEMO_SETTINGS["max_steps"], seed=ws["seed"],
        skill_fraction=ws["skill_fraction"], deviation_prob=ws["deviation_prob"], response_style="action",
        step_skill_wording=ws["step_skill_wording"], env_kwargs=ENV_CONFIG)
    key = hashlib.sha256(json.dumps([dict(ws, **extra), model.name, [(d.prompt, d.response) for d in demos]],
                                    sort_keys=True).encode()).hexdigest()[:8]
    if progress_every_s is None:
        progress_every_s = -1 if model.name.startswith("tiny") else 10.0

    def build(tmp: Path) -> None:
        train_sft(model, demos, tmp, epochs=ws["epochs"], lr=ws["lr"], batch_size=ws["batch_size"],
                  max_prompt_len=DEMO_SETTINGS["max_prompt_len"], seed=ws["seed"], dtype=dtype,
                  progress_every_s=progress_every_s, log=None)

    prefix = "alfworld-rung1" if model.name.startswith("tiny") else f"alfworld-rung1-{model.name}"
    return _build_cached(Path(cache_dir or default_cache_dir()) / "models" / f"{prefix}-{key}", build)
