"""studies/learning.py's run cache: one JSON per finished job, a claim file per job that a --shard process is running,
and one compute dtype and one set of study settings per output folder. A study stopped anywhere resumes from it;
two shards share it."""

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


def check_settings(out: str, settings: dict, noted: dict | None = None) -> None:
    """Runs are cached by variant and seed only, so one --out holds the runs of one study: OUT/settings.json
    records, on first use, everything else a run depends on (learning rate, budget, env, play), and a call with
    other settings is refused rather than mixing its runs with the folder's (a study resumed over several
    sessions must not change its learning rate halfway). A folder from before this record takes its next call's
    settings; a setting the record lacks is added to it. `noted` entries are recorded where the folder lacks them
    and never compared (what a setting came from, e.g. the machine that built the warm start)."""
    path = os.path.join(out, "settings.json")
    settings = json.loads(json.dumps(settings, default=str))  # compared as they read back from JSON
    have = {}
    if os.path.exists(path):
        with open(path) as f:
            have = json.load(f)
        bad = [f"{k}: {have[k]!r} there, {v!r} here" for k, v in settings.items() if k in have and have[k] != v]
        if bad:
            raise SystemExit(f"{out} holds runs made with other settings ({'; '.join(bad)}); give another --out")
    settings = {**(noted or {}), **have, **settings}
    with open(path, "w") as f:
        json.dump(settings, f, indent=1, sort_keys=True)


def _machine(base: str) -> dict | None:
    """The machine opid-sft recorded beside a warm start (sft_stats.json: machine); None for older folders."""
    try:
        with open(os.path.join(base, "sft_stats.json")) as f:
            return json.load(f).get("machine")
    except (OSError, ValueError):
        return None


def _describe(machine: dict | None) -> str:
    if not machine:
        return "a machine it did not record"
    cap = machine.get("onednn_max_cpu_isa")
    return (f"{machine.get('cpu_model')} (bf16 flags {machine.get('bf16_flags')}, torch "
            f"{machine.get('torch_cpu_capability')}{f', ONEDNN_MAX_CPU_ISA={cap}' if cap else ''})")


def check_base(out: str, base: str, base_weights: str) -> None:
    """check_settings for the warm start, known by its weights (base_weights), and the machine it was built on
    recorded beside them on first use (base_machine). Where the weights differ, the refusal says why that happens
    with the same recipe: another kind of CPU rounds differently and rebuilds other weights (docs/STUDIES.md), so it
    names the machine each base was built on."""
    machine = _machine(base)
    try:
        check_settings(out, {"base_weights": base_weights}, noted={"base_machine": machine} if machine else None)
    except SystemExit as e:
        with open(os.path.join(out, "settings.json")) as f:
            have = json.load(f).get("base_machine")
        raise SystemExit(f"{e}. The same recipe rebuilds other weights on another kind of CPU (docs/STUDIES.md, "
                         f"\"Pinning oneDNN's instruction set\"): this base was built on {_describe(machine)}, the "
                         f"folder's on {_describe(have)}; rebuild it on a CPU of the folder's kind") from None
