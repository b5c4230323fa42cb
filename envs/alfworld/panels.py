"""Fixed ALFWorld evaluation panels, read from the shipped specs.jsonl.

Why from the spec file: the task ids (and so Panel.sha256) are then the same on every machine
and Python version, with no engine run needed to list them.
"""

from __future__ import annotations

from envs.alfworld.generator import TASK_TYPES, load_scene, load_specs
from envs.panels import Panel, register_panel


# Six train games, one of each task type, with the shortest expert plans (4-9 commands): what the CPU example
# (opid-train --cpu-example, opid_rllib/presets.py) and the learning gate's rung 1 train on. A 3M-parameter model
# learns games it was warm-started on, not ALFWorld at large.
CPU_EXAMPLE_GAMES = (
    "look_at_obj_in_light-Pillow-None-FloorLamp-217/trial_s25857431",
    "pick_and_place_simple-Bowl-None-Dresser-317/trial_s00193388",
    "pick_clean_then_place_in_recep-Tomato-None-DiningTable-26/trial_s61085295",
    "pick_cool_then_place_in_recep-Bowl-None-DiningTable-17/trial_s03271550",
    "pick_heat_then_place_in_recep-Apple-None-CounterTop-7/trial_s55060010",
    "pick_two_obj_and_place-HandTowel-None-BathtubBasin-419/trial_s22386097",
)


def _split_ids(split: str) -> tuple[str, ...]:
    return tuple(sorted(s["task_id"] for s in load_specs() if s["split"] == split))


def _scene_size(fp: int) -> int:
    scene = load_scene(fp)
    return len(scene.receptacles) + len(scene.object_types)


def smoke_ids(per_type: int = 2) -> tuple[str, ...]:
    """2 valid_unseen games per type, from the smallest scenes and shortest expert solutions."""
    specs = [s for s in load_specs() if s["split"] == "valid_unseen"]
    out = []
    for tt in TASK_TYPES:
        cands = sorted((s for s in specs if s["task_type"] == tt),
                       key=lambda s: (_scene_size(s["fp"]), s["expert_steps"], s["task_id"]))
        picked, fps = [], set()
        for s in cands:  # distinct floor plans first
            if s["fp"] not in fps and len(picked) < per_type:
                picked.append(s["task_id"])
                fps.add(s["fp"])
        picked += [s["task_id"] for s in cands if s["task_id"] not in picked][:per_type - len(picked)]
        out += picked
    return tuple(sorted(out))


def _panel(name: str, split: str, ids) -> Panel:
    # data_dir="": panels name generated games even where $ALFWORLD_DATA points at official data.
    return Panel(name=name, env="alfworld", split=split, task_ids=tuple(ids),
                 env_kwargs={"split": split, "data_dir": ""})


register_panel("alfworld/valid_unseen@v1", lambda: _panel("alfworld/valid_unseen@v1", "valid_unseen",
                                                          _split_ids("valid_unseen")))
register_panel("alfworld/valid_seen@v1", lambda: _panel("alfworld/valid_seen@v1", "valid_seen",
                                                        _split_ids("valid_seen")))
register_panel("alfworld/smoke@v1", lambda: _panel("alfworld/smoke@v1", "valid_unseen", smoke_ids()))
# The CPU example's training games (held in, not a generalisation test): what its policy learned.
register_panel("alfworld/cpu_example@v1", lambda: _panel("alfworld/cpu_example@v1", "train", CPU_EXAMPLE_GAMES))
