"""bench/learning.py's run cache: one JSON per finished job, a claim file per job that a --shard process is running,
and one compute dtype per output folder. A study stopped anywhere resumes from it; two shards share it."""

from __future__ import annotations

import contextlib
import json
import os


def cached(path: str, fn):
    """fn()'s result, saved to `path` as JSON the first time and read from there after."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    out = fn()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=float)
    return out


def claim(path: str) -> bool:
    """Take the job whose result goes to `path` for this process: a claim file made with O_EXCL, holding our pid.
    False while another live process holds it; the claim of a process that is gone (a crashed shard) is taken."""
    lock = path + ".claim"
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                with open(lock) as f:
                    pid = int(f.read().strip() or 0)
                os.kill(pid, 0)  # raises ProcessLookupError when the holder is gone
                return False
            except PermissionError:  # alive, another user's
                return False
            except (ProcessLookupError, ValueError, OSError):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
                continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return True
    return False


def release(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path + ".claim")


def check_dtype(out: str, dtype: str) -> None:
    """Runs are cached by variant and seed only, so one --out holds the runs of one compute dtype (OUT/dtype;
    a folder with runs and no marker predates --dtype: float32)."""
    marker = os.path.join(out, "dtype")
    have = "float32" if os.path.isdir(os.path.join(out, "runs")) else None
    if os.path.exists(marker):
        with open(marker) as f:
            have = f.read().strip()
    if have is not None and have != dtype:
        raise SystemExit(f"--dtype {dtype}: {out} holds {have} runs; give another --out")
    with open(marker, "w") as f:
        f.write(dtype + "\n")
