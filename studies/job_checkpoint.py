"""studies/learning.py's job checkpoints: a training job cut short (a session's end, a kill) resumes from its last
finished iteration instead of from scratch. On SmolLM2 one iteration took 7-21 min on machine D and a job's training
49-85 min (one float32 iteration on a CPU without bf16 ran over 29 min), so a job that starts over loses up to a
sitting's work; run_cache.py keeps only finished jobs.

After every iteration the job saves the algorithm (policy weights, AdamW state, the task stream, and the random
generators of its processes and the runners' skill caches: RLlib's `save_to_path` with OPID's resume state) with its
records so far, so that the resumed job draws what the uninterrupted one would have drawn. The new checkpoint is
written beside the last and then swapped in, so a kill during a save leaves the previous one whole. A trained job
keeps `trained.json` and its exported policy until its panel play ends, so a play cut short does not train again.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import numpy as np
import torch

from opid_rllib.cli.run_log import RESULTS  # the job's per-iteration RLlib results (studies/learning.py writes them)

CKPT, RECORD, RNG, TRAINED = "checkpoint", "progress.json", "rng.pt", "trained.json"


def save(algo, run_dir: str, progress: dict) -> None:
    """Checkpoint `algo` after an iteration, with `progress` (the job's iteration records and seconds so far)."""
    final = os.path.abspath(os.path.join(run_dir, CKPT))  # RLlib reads a relative path as a URI and fails
    tmp, old = final + ".tmp", final + ".old"
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_to_path(tmp)
    if os.path.exists(os.path.join(run_dir, RESULTS)):  # its lines so far, kept with the state they belong to
        shutil.copyfile(os.path.join(run_dir, RESULTS), os.path.join(tmp, RESULTS))
    with open(os.path.join(tmp, RECORD), "w") as f:
        json.dump(progress, f, default=float)
    shutil.rmtree(old, ignore_errors=True)
    if os.path.isdir(final):
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def latest(run_dir: str) -> str | None:
    """The job's last whole checkpoint (the previous one where a kill fell between the two renames), or None."""
    for name in (CKPT, CKPT + ".old"):
        path = os.path.join(run_dir, name)
        if os.path.exists(os.path.join(path, RECORD)):
            return path
    return None


def restore(algo, path: str) -> dict:
    """Load checkpoint `path` into a freshly built `algo` (generators included); its progress record."""
    algo.restore_from_path(os.path.abspath(path))
    legacy = os.path.join(path, RNG)  # checkpoints from before the algorithm carried the generators kept them here
    if os.path.exists(legacy):
        rng = torch.load(legacy, weights_only=False)
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
    with open(os.path.join(path, RECORD)) as f:
        return json.load(f)


def mark_trained(run_dir: str, progress: dict) -> None:
    """Training ended and the policy is exported: keep the records for the play, drop the checkpoints (SmolLM2's
    weights alone are 514 MB; AdamW's two moments add twice that)."""
    with open(os.path.join(run_dir, TRAINED), "w") as f:
        json.dump(progress, f, default=float)
    for name in (CKPT, CKPT + ".tmp", CKPT + ".old"):
        shutil.rmtree(os.path.join(run_dir, name), ignore_errors=True)


def trained(run_dir: str) -> dict | None:
    """The records of a job whose training ended and whose exported policy is there, or None."""
    path = os.path.join(run_dir, TRAINED)
    if not (os.path.exists(path) and os.path.exists(os.path.join(run_dir, "policy", "config.json"))):
        return None
    with open(path) as f:
        return json.load(f)
