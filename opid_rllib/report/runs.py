"""Finding run dirs and loading their metrics (result.json / progress.csv) as flat rows.

A run dir is what `opid-train` writes for one trial: `result.json` (one nested JSON result per
line) and/or `progress.csv` (flattened with "/"), plus `opid_skills/iter_XXXXX.jsonl` skill dumps
(see `OPID._dump_skills`). `--no-tune` runs write them straight into --output; Tune runs one level
down, in `<output>/<experiment>/<trial>/`. `find_run_dirs` accepts either and anything in between.

Best effort: a bad JSON line is skipped and counted, a missing file gives no rows.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

SKILL_DIR = "opid_skills"
_SKIP_DIRS = {"report", "__pycache__", ".git"}


# ---- finding runs ----------------------------------------------------------------------------
def is_run_dir(path: os.PathLike | str) -> bool:
    p = Path(path)
    return p.is_dir() and ((p / "result.json").is_file() or (p / "progress.csv").is_file()
                           or (p / SKILL_DIR).is_dir())


def find_run_dirs(root: os.PathLike | str, max_depth: int = 4) -> list[Path]:
    """`root` itself if it is a run dir, else every run dir below it (Tune: <exp>/<trial>), sorted."""
    root = Path(root)
    if is_run_dir(root):
        return [root]
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        if depth > max_depth:
            return
        try:
            subs = sorted(p for p in d.iterdir() if p.is_dir())
        except OSError:
            return
        for s in subs:
            if s.name in _SKIP_DIRS or s.name.startswith("checkpoint_") or s.name.startswith("."):
                continue
            if is_run_dir(s):
                found.append(s)
            else:
                walk(s, depth + 1)

    walk(root, 1)
    return found


# ---- metrics ---------------------------------------------------------------------------------
def flatten(d: dict, prefix: str = "", skip: Iterable[str] = ("config",)) -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a/b": 1} (the keys Tune's progress.csv and TensorBoard use)."""
    out: dict[str, Any] = {}
    skip = set(skip)
    for k, v in d.items():
        if not prefix and k in skip:
            continue
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/", ()))
        else:
            out[key] = v
    return out


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        f = float(v)
    elif isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
    elif isinstance(v, (list, tuple)) and v:  # a windowed metric that was not reduced: its mean
        nums = [_number(x) for x in v]
        nums = [x for x in nums if x is not None]
        if not nums:
            return None
        f = sum(nums) / len(nums)
    else:
        return None
    return f if math.isfinite(f) else None


def read_json_lines(path: os.PathLike | str) -> tuple[list[Any], int]:
    """The JSON values of a JSONL file's non-empty lines, and how many lines did not parse."""
    values: list[Any] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                values.append(json.loads(line))
            except ValueError:
                bad += 1
    return values, bad


def load_results(run_dir: os.PathLike | str) -> tuple[list[dict[str, Any]], list[str]]:
    """Flattened result rows sorted by training_iteration (last row wins per iteration), warnings.

    result.json first (all metrics, nested); progress.csv if result.json is missing or empty.
    """
    run_dir = Path(run_dir)
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    rj, pc = run_dir / "result.json", run_dir / "progress.csv"
    if rj.is_file():
        objs, bad = read_json_lines(rj)  # a bad line: e.g. the last line of a run that is still writing
        rows = [flatten(obj) for obj in objs if isinstance(obj, dict)]
        if bad:
            warnings.append(f"result.json: skipped {bad} unreadable line(s)")
    if not rows and pc.is_file():
        try:
            with open(pc, newline="", encoding="utf-8", errors="replace") as f:
                rows = [dict(r) for r in csv.DictReader(f)]
        except (OSError, csv.Error) as e:
            warnings.append(f"progress.csv: {e}")
    by_iter: dict[float, dict[str, Any]] = {}
    for i, r in enumerate(rows):
        it = _number(r.get("training_iteration"))
        by_iter[it if it is not None else float(i + 1)] = r
    out = []
    for it in sorted(by_iter):
        r = by_iter[it]
        r["training_iteration"] = it
        out.append(r)
    return out, warnings


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(iterations, values) of one metric; an evaluation/ metric only where it was measured (an iteration
    without evaluation carries the latest one, marked by evaluation/evaluated_at_iteration)."""
    xs, ys = [], []
    for r in rows:
        if key.startswith("evaluation/") and "evaluation/evaluated_at_iteration" in r and \
                _number(r["evaluation/evaluated_at_iteration"]) != _number(r.get("training_iteration")):
            continue
        y = _number(r.get(key))
        if y is not None:
            xs.append(float(r["training_iteration"]))
            ys.append(y)
    return xs, ys


