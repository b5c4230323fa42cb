"""ALFWorld as an offline gymnasium text env on the real ALFWorld/TextWorld engine.

Why this shape:
  * Games come from specs.jsonl (built by generator.py, verified offline by verify.py), rebuilt on first use
    in milliseconds into the cache dir, in the official `<task_dir>/trial_X/` layout; with
    `data_dir=` (or $ALFWORLD_DATA) a downloaded json_2.1.1 tree is played instead (official.py
    indexes it: bad trials are skipped with a warning, errors name their file).
  * Play goes through engine.Engine: TextWorld's PDDL engine (engine.FastPddlEnv, a cached PddlEnv)
    wrapped by alfworld's own AlfredDemangler and its hand-coded expert (expert.PatchedAlfredExpert),
    so the observations and admissible commands are ALFWorld's.
  * `expert=` picks whose next command fills info["expert_actions"] (what the oracle skills, the built-in
    hindsight analyzer and the agreement metric name): "handcoded" (alfworld's expert, which remembers
    every place it has looked into) or "sweep" (sweep.SweepDemonstrator, which acts on the prompt's
    information only, tracked along whatever the agent did, DAgger-style), or none.
  * One engine per env instance, reused across resets (a reset of the same game skips loading).
  * Commands that are not admissible never reach the engine: ALFWorld answers them with
    "Nothing happens." and no state change, which we return directly (action_valid=False).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from envs.alfworld import generator as gen
from envs.alfworld.engine import Engine, expert_seed
from envs.alfworld.official import OfficialIndex, build_index
from envs.alfworld.sweep import SweepDemonstrator
from envs.base import TextEnv

NOTHING_HAPPENS = "Nothing happens."
WIN_REWARD = 10.0
_OFFICIAL_INDEX: dict[str, OfficialIndex] = {}
_SPECS: dict[str, dict[str, dict]] = {}
EXPERTS = ("handcoded", "sweep", "none")


def expert_kind(expert: bool | str) -> str:
    """True/False (the old flag) -> "handcoded"/"none"; a name is checked against EXPERTS."""
    if isinstance(expert, bool):
        return "handcoded" if expert else "none"
    if expert not in EXPERTS:
        raise ValueError(f"expert={expert!r}: choose one of {EXPERTS} (or True/False)")
    return str(expert)


def default_cache_dir() -> Path:
    root = os.environ.get("OPID_CACHE_DIR")
    return Path(root) / "alfworld" if root else Path.home() / ".cache" / "opid_rllib" / "alfworld"


def normalize_command(action: str) -> str:
    return " ".join(str(action).strip().lower().split())


def goal_of(intro: str) -> str:
    return intro.split("Your task is to:", 1)[-1].strip() if "Your task is to:" in intro else ""


def specs_by_split(split: str) -> dict[str, dict]:
    if not _SPECS:
        for s in gen.load_specs():
            _SPECS.setdefault(s["split"], {})[s["task_id"]] = s
    return _SPECS.get(split, {})


def official_index(root: Path) -> OfficialIndex:
    """Playable trials of one split folder (built once per process; see official.py)."""
    key = str(root.resolve())
    if key not in _OFFICIAL_INDEX:
        _OFFICIAL_INDEX[key] = build_index(root)
    return _OFFICIAL_INDEX[key]


def _has_official_split(path: Path, split: str) -> bool:
    path = path.expanduser()
    return (path / "json_2.1.1" / split).is_dir() or (path / split).is_dir()


class ALFWorldEnv(TextEnv):
    """ALFWorld text games; see module docstring. Reward 10 on a win, terminated on a win.

    data_dir: None -> $ALFWORLD_DATA if set, else the generated games; "" -> generated games;
    a path -> that json_2.1.1 tree (or its parent), split = its train/valid_seen/valid_unseen folder.
    Bad official trials are skipped with a warning and listed in `skipped_trials` (dir -> reason).
    cache_dir: generated games and PDDL translations (default $OPID_CACHE_DIR/alfworld or
    ~/.cache/opid_rllib/alfworld). expert: who fills info["expert_actions"]: "handcoded" (True, the
    default; most of a step's cost), "sweep" (cheap) or "none" (False).
    """

    env_name = "alfworld"
    default_max_steps = 30

    def __init__(self, split: str = "train", max_steps: int | None = None, cache_dir: str | None = None,
                 data_dir: str | None = None, expert: bool | str = True, **kwargs: Any):
        super().__init__(split=split, max_steps=max_steps, **kwargs)
        if split not in gen.SPLITS:
            raise ValueError(f"split={split!r}: choose one of {gen.SPLITS}")
        if data_dir is None:
            data_dir = os.environ.get("ALFWORLD_DATA")
            # `import alfworld` itself sets ALFWORLD_DATA to ~/.cache/alfworld; without a download
            # there, that default must mean "use the generated games", not an error.
            if data_dir and not _has_official_split(Path(data_dir), split) and \
                    Path(data_dir).expanduser() == Path("~/.cache/alfworld").expanduser():
                data_dir = ""
        self.data_dir = Path(data_dir) if data_dir else None
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.expert = expert_kind(expert)
        self.use_expert = self.expert == "handcoded"
        self._sweep = SweepDemonstrator() if self.expert == "sweep" else None
        if self.data_dir is not None:
            if not self.data_dir.expanduser().is_dir():
                raise FileNotFoundError(f"data_dir={str(self.data_dir)!r}: this path does not exist; point data_dir "
                                        "(or $ALFWORLD_DATA) at the folder holding json_2.1.1, or leave it unset for the "
                                        "generated games")
            root = self.data_dir / "json_2.1.1" if (self.data_dir / "json_2.1.1").is_dir() else self.data_dir
            if not (root / split).is_dir():
                raise FileNotFoundError(f"data_dir={str(self.data_dir)!r}: no {split!r} folder under {root}")
            try:
                self._official = official_index(root / split)
            except FileNotFoundError as e:
                raise FileNotFoundError(f"data_dir={str(self.data_dir)!r}: {e}") from None
            self._ids = tuple(self._official.games)
        else:
            self._official = None
            self._ids = tuple(sorted(specs_by_split(split)))
        self._id_set = frozenset(self._ids)
        self.skipped_trials: dict[str, str] = dict(self._official.skipped) if self._official else {}
        self._engine: Engine | None = None
        self._task: dict[str, Any] = {}

    def task_ids(self) -> Sequence[str]:
        return self._ids

    def gamefile(self, task_id: str) -> str:
        """Path of the game file (generated games are written to the cache on first use)."""
        if self._official is not None:
            return self._official.games[task_id]
        spec = specs_by_split(self.split)[task_id]
        root = self.cache_dir / gen.GEN_VERSION / self.split
        path = root / task_id / "game.tw-pddl"
        if not path.exists():
            g = gen.make_game(spec["fp"], spec["task_type"], spec["seed"])
            if g is None or gen.task_id_of(g) != task_id or gen.game_sha(g) != spec["sha"]:
                raise RuntimeError(f"task_id={task_id!r}: generator output differs from the verified spec "
                                   f"(generator changed without bumping GEN_VERSION and re-verifying)")
            path = gen.write_game(g, root)
        return str(path)

    def _task_meta(self, task_id: str, gamefile: str) -> dict[str, Any]:
        if self._official is None:
            s = specs_by_split(self.split)[task_id]
            gt = {"object_target": s["obj"], "parent_target": s["recep"], "toggle_target": s["toggle"],
                  "floor_plan": s["fp"], "expert_steps": s["expert_steps"]}
            return {"task_type": s["task_type"], "ground_truth": gt}
        meta = self._official.meta[task_id]
        return {"task_type": meta["task_type"], "ground_truth": dict(meta["ground_truth"])}

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        if task_id not in self._id_set:
            raise KeyError(f"task_id={task_id!r}: not in split {self.split!r} ({len(self._ids)} tasks)")
        gamefile = self.gamefile(task_id)
        if self._engine is None:
            self._engine = Engine(expert=self.use_expert, translation_dir=self.cache_dir / "translations")
        try:
            state = self._engine.reset(gamefile, expert_seed(task_id))
        except (Exception, SystemExit) as e:  # a broken game must name its file, and never exit the process
            raise RuntimeError(f"{gamefile}: could not load this game ({type(e).__name__}: {e})") from e
        meta = self._task_meta(task_id, gamefile)
        goal = goal_of(state.feedback)
        meta["ground_truth"].update(goal=goal, gamefile=gamefile)
        self._task = {"task": goal, **meta}
        if self._sweep is not None:  # before _info, which asks it for the first command
            self._sweep.reset(state.feedback, {"task_type": meta["task_type"], "ground_truth": meta["ground_truth"],
                                               "admissible_actions": self._admissible()})
        return state.feedback, self._info(action_valid=True)

    def _info(self, action_valid: bool) -> dict[str, Any]:
        st = self._engine.state
        admissible = self._admissible()
        return {"task": self._task["task"], "task_type": self._task["task_type"],
                "admissible_actions": admissible,
                "won": bool(st["won"]), "action_valid": action_valid,
                "expert_actions": self._plan(admissible),
                "ground_truth": dict(self._task["ground_truth"])}

    def _admissible(self) -> list[str]:
        return [c for c in self._engine.state["admissible_commands"] if c != "help"]

    def _plan(self, admissible: list[str]) -> list[str]:
        if self._sweep is None:
            return self._engine.plan()
        cmd = self._sweep.act("", {"admissible_actions": admissible})
        return [cmd] if cmd else []

    def _step_task(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        command = normalize_command(action)
        if command not in self._engine.state["admissible_commands"]:
            return NOTHING_HAPPENS, 0.0, False, self._info(action_valid=False)
        state = self._engine.step(command)
        if self._sweep is not None:
            self._sweep.observe(command, state.feedback)
        won = bool(state["won"])
        return state.feedback, WIN_REWARD if won else 0.0, won, self._info(action_valid=True)
