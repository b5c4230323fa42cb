"""What `opid-train --no-tune` writes per iteration: TensorBoard scalars and result.json lines."""

from __future__ import annotations

import json
import os

RESULTS = "result.json"


def open_run_logs(output: str, resumed_at: int = 0):
    """(TensorBoard writer, result.json opened for appending) in `output`, for a run that goes on after iteration
    `resumed_at` (0: a new run).

    A run cut after its last checkpoint has logged iterations that the resumed run plays again: result.json keeps
    only its lines up to `resumed_at` (a line cut mid-write goes too), and TensorBoard hides the later events
    (`purge_step`), so each iteration shows once.
    """
    path = os.path.join(output, RESULTS)
    if resumed_at and os.path.exists(path):
        with open(path) as f:
            kept = [line for line in f if 0 < _iteration(line) <= resumed_at]
        with open(path, "w") as f:
            f.writelines(kept)
    return open_tensorboard(output, resumed_at), open(path, "a")


def open_tensorboard(output: str, resumed_at: int = 0):
    """TensorBoard writer in `output` for a run that goes on after iteration `resumed_at` (0: a new run): the events
    a cut run logged after it are hidden (`purge_step`)."""
    from tensorboardX import SummaryWriter

    return SummaryWriter(output, purge_step=resumed_at + 1 if resumed_at else None)


def _iteration(line: str) -> int:
    try:
        return int(json.loads(line).get("training_iteration", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


def _flatten(d, prefix=""):
    for k, v in d.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from _flatten(v, key)
        else:
            yield key, v


def write_tensorboard(writer, result: dict, step: int) -> None:
    """Every finite number of a (nested) result dict as a scalar named by its key path."""
    for key, v in _flatten(result):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf"):
            writer.add_scalar(key, float(v), step)
    writer.flush()


def jsonable_result(result: dict) -> dict:
    """The JSON-writable part of a result dict (config and objects left out), for result.json lines."""
    out = {}
    for k, v in result.items():
        if k == "config":
            continue
        if isinstance(v, dict):
            out[k] = jsonable_result(v)
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
    return out


def ray_session_dir(ctx) -> str:
    """Ray's session folder (under /tmp/ray by default: its logs and spill files, kept until the next reboot)."""
    info = getattr(ctx, "address_info", None) or {}
    return str(info.get("session_dir") or "/tmp/ray/session_latest")


def print_outputs(results: str) -> None:
    """The run's closing lines: what it wrote and where, and the shared caches it used."""
    from opid_rllib.models.cache import default_cache_dir

    print(f"[opid-train] wrote {results}", flush=True)
    print(f"[opid-train] caches (reused by later runs): the models and generated games under {default_cache_dir()}",
          flush=True)
