"""Official ALFWorld data (the json_2.1.1 layout): find the playable trials of a split.

Why its own module and why so careful: a downloaded tree holds thousands of trials, and a few bad
files (an interrupted download, a hand-edited game) must not stop the whole split nor fail
without saying where. Every error names its file; a bad trial is skipped with one warning per
split and counted (`OfficialIndex.skipped`); a split without a playable game says where it
looked. Trials are filtered like alfworld's AlfredTWEnv (movable/Sliced folders, unsolvable games).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TRAJ_FILE = "traj_data.json"
GAME_FILE = "game.tw-pddl"
GAME_KEYS = ("pddl_domain", "pddl_problem", "grammar")
GT_KEYS = ("object_target", "parent_target", "toggle_target")
_FIX = "re-download the data or delete this trial's folder"


class TrialError(ValueError):
    """One trial's files are unusable; the message starts with the file's path."""


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise TrialError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); {_FIX}") from None
    except UnicodeDecodeError as e:
        raise TrialError(f"{path}: not UTF-8 text ({e.reason}); {_FIX}") from None
    except OSError as e:
        raise TrialError(f"{path}: cannot read ({e.strerror or e}); {_FIX}") from None


def trial_meta(traj_path: Path) -> dict[str, Any]:
    """task_type and ground truth of a trial, from its traj_data.json."""
    traj = read_json(traj_path)
    try:
        params = traj["pddl_params"]
        gt = {k: params.get(k, "") for k in GT_KEYS}
        task_type = str(traj["task_type"])
    except KeyError as e:
        raise TrialError(f"{traj_path}: missing key {e.args[0]!r} (not an ALFRED traj_data.json?); {_FIX}") from None
    except (TypeError, AttributeError):
        raise TrialError(f"{traj_path}: 'pddl_params' is not an object (not an ALFRED traj_data.json?); "
                         f"{_FIX}") from None
    scene = traj.get("scene")
    gt["floor_plan"] = scene.get("scene_num") if isinstance(scene, dict) else None
    return {"task_type": task_type, "ground_truth": gt}


@dataclass
class OfficialIndex:
    root: Path                                  # the split folder that was searched
    games: dict[str, str] = field(default_factory=dict)        # task id (trial dir) -> game file
    meta: dict[str, dict] = field(default_factory=dict)        # task id -> trial_meta
    skipped: dict[str, str] = field(default_factory=dict)      # bad trial dir -> why (names the file)
    filtered: int = 0                           # movable/Sliced/unsolvable, as in AlfredTWEnv
    trials: int = 0                             # trial folders seen


def _check_trial(d: Path) -> tuple[str, dict] | None:
    """(game file, meta) of a playable trial; None if filtered out; TrialError if bad."""
    traj, game = d / TRAJ_FILE, d / GAME_FILE
    if not traj.exists():
        raise TrialError(f"{game}: no {TRAJ_FILE} next to it; {_FIX}")
    if not game.exists():
        raise TrialError(f"{traj}: no {GAME_FILE} next to it (alfworld's AlfredTWEnv skips it too)")
    data = read_json(game)
    if not isinstance(data, dict) or "solvable" not in data:
        raise TrialError(f"{game}: no 'solvable' key (not a checked TextWorld game file); {_FIX}")
    if not data["solvable"]:
        return None
    missing = [k for k in GAME_KEYS if k not in data]
    if missing:
        raise TrialError(f"{game}: missing key(s) {missing} (not a TextWorld PDDL game file); {_FIX}")
    for key in ("pddl_domain", "pddl_problem"):
        why = pddl_shape_error(data[key])
        if why:
            raise TrialError(f"{game}: {key} is malformed PDDL ({why}); {_FIX}")
    return str(game), trial_meta(traj)


def pddl_shape_error(text: Any) -> str | None:
    """Why a PDDL text cannot parse, from its shape alone, or None.

    Why not TextWorld's parser: it takes about a second a file, minutes for a split of thousands, while
    a bad download or a hand edit shows as unbalanced parentheses, which a scan finds in microseconds.
    A file that passes can still fail to load; reset then names it and the env goes on with other games."""
    if not isinstance(text, str) or not text.strip():
        return "empty"
    depth = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        for ch in line.split(";", 1)[0]:          # ';' starts a comment
            depth += (ch == "(") - (ch == ")")
            if depth < 0:
                return f"an unmatched ')' on line {lineno}"
    return f"{depth} '(' never closed" if depth else None


def build_index(split_root: Path) -> OfficialIndex:
    """Every trial folder under `split_root` (one holding traj_data.json or game.tw-pddl)."""
    idx = OfficialIndex(root=split_root)
    dirs = {p.parent for name in (TRAJ_FILE, GAME_FILE) for p in split_root.rglob(name)}
    for d in sorted(dirs):
        idx.trials += 1
        if "movable" in str(d) or "Sliced" in str(d):
            idx.filtered += 1
            continue
        rel = d.relative_to(split_root).as_posix()
        try:
            found = _check_trial(d)
        except TrialError as e:
            idx.skipped[rel] = str(e)
            continue
        if found is None:
            idx.filtered += 1
            continue
        idx.games[rel], idx.meta[rel] = found
    if idx.skipped:
        shown = "; ".join(list(idx.skipped.values())[:3])
        more = f" (and {len(idx.skipped) - 3} more)" if len(idx.skipped) > 3 else ""
        log.warning("ALFWorld data %s: skipped %d bad trial(s) of %d: %s%s", split_root, len(idx.skipped),
                    idx.trials, shown, more)
    if not idx.games:
        raise FileNotFoundError(
            f"no playable ALFWorld game under {split_root}: looked for <task>/<trial>/{TRAJ_FILE} + {GAME_FILE}; "
            f"found {idx.trials} trial folder(s), {idx.filtered} filtered (movable/Sliced/unsolvable), "
            f"{len(idx.skipped)} bad" + (f" (first: {next(iter(idx.skipped.values()))})" if idx.skipped else ""))
    return idx
