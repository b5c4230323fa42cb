"""What `opid-train --no-tune` writes per iteration: TensorBoard scalars and result.json lines."""

from __future__ import annotations


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
