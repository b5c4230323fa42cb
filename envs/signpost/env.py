"""Signpost: rooms in a row, each with coloured doors and a sign naming the one that opens.

Why: rung 0 of the learning gate (docs/LEARNING_GATE.md), a task any working policy-gradient loop learns from
the outcome alone in minutes on 2 CPU cores and a broken one (advantage sign, old log-probs, optimizer step)
does not. It follows the text-env contract (envs/base.py), so the runner, the analyzer, the warm start and
the skill slots treat it like ALFWorld: the same `<action>` format, an `expert_actions` plan for the hindsight
analyzer, 10 points for a win.

A task id fixes every room's door order and the door its sign names (seeded, machine-independent). A wrong
door is locked and the agent stays (it may try again until `max_steps`); the right one leads to the next
room; passing the last room's door wins. With `signs=False` every door opens and no sign is shown (the
expert still names the seeded door, a uniform pick): a warm start there learns the format but not the signs,
so it starts the signed game at chance, 1 / n_doors per room. `fixed_sign` makes the sign name one colour in
every room (rung 0's recipe): reading a sign that changes is a copy the tiny model needs far more than
minutes of RL for (bench/signpost_copy_probe.py).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from envs.base import TextEnv, setting

COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple")
WIN_REWARD = 10.0
NOTHING_HAPPENS = "Nothing happens."
TASK = "open the doors the signs name"
HOUSE_TASK = "open the door of your house in every room"
# Disjoint task-id seed ranges per split: a valid task is never a train task.
SPLITS = {"train": (0, 1000), "valid": (100_000, 100_256), "test": (200_000, 200_256)}


def command(colour: str) -> str:
    return f"open {colour} door"


class SignpostEnv(TextEnv):
    env_name = "signpost"
    default_max_steps = 3

    def __init__(self, split: str = "train", max_steps: int | None = None, n_rooms: int = 2, n_doors: int = 4,
                 n_marks: int = 0, signs: bool | str = True, fixed_sign: str | None = None, houses: bool = False,
                 same_door: bool = False, wrong_door_leads_on: bool = False, **kwargs: Any):
        """n_rooms, n_doors: the difficulty (chance success is about (1 / n_doors) ** n_rooms with one try per
        room); max_steps defaults to n_rooms + 1 (one spare try); n_marks: graffiti naming other doors' colours
        (distractors in the observation); signs=False: every door opens, no sign; signs="hidden": no sign, a wrong
        door is still locked; fixed_sign: the sign names this colour in every room (a choice that needs no reading,
        see the module doc), None: a random door; houses: the observation names the task's house ("House 3.");
        same_door: every room of a task opens on one colour; wrong_door_leads_on: a wrong door opens onto the next
        room too, but the episode is lost (played to its end: one step per room, so step t is room t + 1 in every
        episode of a task, and a skill written for step t of one episode names the right door at step t of
        another)."""
        if split not in SPLITS:
            raise ValueError(f"signpost env: split={split!r}: choose one of {sorted(SPLITS)}")
        n_rooms = setting("n_rooms", n_rooms, int)
        if max_steps is None:
            max_steps = n_rooms + 1
        super().__init__(split=split, max_steps=max_steps, **kwargs)
        self.n_rooms = n_rooms
        self.n_doors = setting("n_doors", n_doors, int)
        if self.n_rooms < 1:
            raise ValueError(f"signpost env: n_rooms={self.n_rooms}: must be >= 1")
        if not 2 <= self.n_doors <= len(COLOURS):
            raise ValueError(f"signpost env: n_doors={self.n_doors}: must be in 2..{len(COLOURS)}")
        self.n_marks = setting("n_marks", n_marks, int)
        if not 0 <= self.n_marks < self.n_doors:
            raise ValueError(f"signpost env: n_marks={self.n_marks}: must be in 0..n_doors - 1 ({self.n_doors - 1})")
        if fixed_sign is not None and fixed_sign not in COLOURS[: self.n_doors]:
            raise ValueError(f"signpost env: fixed_sign={fixed_sign!r}: must be None or one of the doors "
                             f"{list(COLOURS[: self.n_doors])}")
        self.fixed_sign = fixed_sign
        if signs not in (True, False, "hidden") or isinstance(signs, (int, float)) and not isinstance(signs, bool):
            raise ValueError(f"signpost env: signs={signs!r}: must be true (shown), false (none, every door opens) "
                             "or 'hidden' (none shown, a wrong door locked)")
        self.signs = signs
        for name, value in (("houses", houses), ("same_door", same_door), ("wrong_door_leads_on", wrong_door_leads_on)):
            if not isinstance(value, bool):
                raise ValueError(f"signpost env: {name}={value!r}: must be true or false")
        if same_door and fixed_sign is not None:
            raise ValueError("signpost env: same_door=true draws each task's door itself: leave fixed_sign unset")
        if wrong_door_leads_on and signs is False:
            raise ValueError("signpost env: wrong_door_leads_on=true needs locked doors: signs=true or 'hidden'")
        self.houses, self.same_door, self.wrong_door_leads_on = houses, same_door, wrong_door_leads_on
        self._rooms: list[tuple[list[str], str, list[str]]] = []
        self._room, self._lost = 0, False
        self._house = ""

    def task_ids(self) -> Sequence[str]:
        lo, hi = SPLITS[self.split]
        return [f"signpost-{self.split}-{i}" for i in range(hi - lo)]

    def _layout(self, task_id: str) -> list[tuple[list[str], str, list[str]]]:
        """Per room: (doors in the order shown, the door the sign names, the graffiti colours in the order shown)."""
        try:
            split, idx = task_id.rsplit("-", 2)[1:]
            lo, hi = SPLITS[split]
            seed = lo + int(idx)
            assert lo <= seed < hi
        except (ValueError, KeyError, AssertionError):
            raise ValueError(f"signpost env: task_id={task_id!r}: not one of this env's ids "
                             "('signpost-<split>-<n>')") from None
        rng = np.random.default_rng([seed, self.n_rooms, self.n_doors])
        house_door = COLOURS[int(np.random.default_rng([seed, self.n_doors, 7]).integers(self.n_doors))]
        rooms = []
        for _ in range(self.n_rooms):
            doors = [COLOURS[i] for i in rng.permutation(self.n_doors)]
            right = doors[int(rng.integers(self.n_doors))] if self.fixed_sign is None else self.fixed_sign
            right = house_door if self.same_door else right
            others = [c for c in doors if c != right]
            marks = [others[int(i)] for i in rng.permutation(len(others))[: self.n_marks]]
            rooms.append((doors, right, marks))
        return rooms

    def _room_text(self) -> str:
        _, right, marks = self._rooms[self._room]
        sign = f" Sign: {right}." if self.signs is True else ""
        graffiti = f" Graffiti: {', '.join(marks)}." if marks else ""
        house = f"House {self._house}. " if self.houses else ""
        return f"{house}Room {self._room + 1} of {self.n_rooms}.{sign}{graffiti}"

    def _info(self, action_valid: bool, won: bool = False, out: bool = False) -> dict[str, Any]:
        doors = self._rooms[self._room][0] if not (won or out) else []
        plan = [] if (won or out) else [command(right) for _, right, _ in self._rooms[self._room:]]
        return {"task": HOUSE_TASK if self.houses else TASK, "task_type": f"rooms{self.n_rooms}_doors{self.n_doors}",
                "admissible_actions": [command(c) for c in doors], "won": won, "action_valid": action_valid,
                "expert_actions": plan, "ground_truth": {}}

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._rooms = self._layout(task_id)
        self._house = task_id.rsplit("-", 1)[1]
        self._room, self._lost = 0, False
        return self._room_text(), self._info(action_valid=True)

    def _step_task(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        a = " ".join(str(action).lower().split())
        doors, right, _ = self._rooms[self._room]
        if a not in {command(c) for c in doors}:
            return NOTHING_HAPPENS, 0.0, False, self._info(action_valid=False)
        colour = a.split()[1]
        if self.signs is not False and colour != right:
            if not self.wrong_door_leads_on:
                return f"The {colour} door is locked. {self._room_text()}", 0.0, False, self._info(action_valid=True)
            self._lost = True
        self._room += 1
        if self._room == self.n_rooms:
            self._room -= 1
            if self._lost:
                return (f"The {colour} door opens. You are out, but through a wrong door. You lost.", 0.0, True,
                        self._info(action_valid=True, won=False, out=True))
            return (f"The {colour} door opens. You are out. You won.", WIN_REWARD, True,
                    self._info(action_valid=True, won=True))
        return f"The {colour} door opens. {self._room_text()}", 0.0, False, \
            self._info(action_valid=True)
