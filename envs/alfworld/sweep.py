"""A demonstrator the student can imitate: ALFWorld played from what the prompt shows, nothing else.

Why: ALFWorld's hand-coded expert remembers every receptacle it has looked into and where it saw each
object, and breaks ties at random; the policy sees the task, the last `history_length` steps, the
current observation and the admissible commands. Cloned, that expert gives a student that guesses
where to go next (11-14 % of its moves agree, README): the expert's information is not in the prompt.
This demonstrator decides from the prompt's information only, so a student can in principle copy it:

* search: visit receptacles in the env's own order (the step-0 'go to' list, which the admissible list
  shows minus the current place), restricted to the receptacle classes ALFWorld's priors allow for the
  wanted object (`OBJECT_TO_VAL_RECEPTACLE`, all receptacles where the priors name none); the next place
  is the first allowed one after the current place whose 'go to' is admissible (places next to this one
  have none and are skipped), so no memory of visited places is needed; open the place when 'open <it>'
  is admissible;
* take the wanted object as soon as a 'take <object> N from ...' command is admissible (for the second
  object of a pick-two task, not from the target it was put in), use the lamp as soon as
  'use <lamp> N' is admissible;
* then walk a fixed route: the appliance (heat: microwave, cool: fridge, clean: sinkbasin or
  bathtubbasin), then the first receptacle of the target class, open it if closed, put the object;
  holding a wrong object (a recovery state), put it down where it is.

Its decisions use the task (object, target, lamp: all named in the task line), the current place and
what it holds (readable from the last steps and the admissible commands), and whether the object was
heated/cooled/cleaned (the step after shows it; from there its route leads straight to the target, so
on its own games the place decides). It is the data of
`opid-sft --demonstrator sweep`; the env's `expert_actions` (what the oracle and the hindsight analyzer
name) stay the hand-coded expert's, which knows more: that difference is the skill teacher's headroom.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

# The appliance each transform needs, in the order ALFWorld's expert tries them.
APPLIANCES = {"heat": ("microwave",), "cool": ("fridge",), "clean": ("sinkbasin", "bathtubbasin")}
_TRANSFORM = {"pick_heat_then_place_in_recep": "heat", "pick_cool_then_place_in_recep": "cool",
              "pick_clean_then_place_in_recep": "clean"}


def _priors() -> dict[str, list[str]]:
    try:
        from alfworld.agents.expert.handcoded_expert import BasePolicy
    except Exception:  # alfworld not installed: search every receptacle
        return {}
    return {k: list(v) for k, v in BasePolicy.OBJECT_TO_VAL_RECEPTACLE.items()}


def receptacle_class(name: str) -> str:
    return name.rsplit(" ", 1)[0]


class SweepDemonstrator:
    """One episode at a time: `reset(obs, info)`, then `act(obs, info)` -> next command (or None).

    `info` is the env's step info (task_type, ground_truth, admissible_actions); ground_truth is only
    read for the object, target and lamp classes, which the task line names too.
    """

    def __init__(self, use_priors: bool = True):
        self.use_priors = use_priors
        self._prior_table = _priors() if use_priors else {}

    # ---- episode state ----
    def reset(self, obs: str, info: Mapping[str, Any]) -> None:
        gt = info.get("ground_truth") or {}
        self.task_type = str(info.get("task_type", ""))
        self.obj = str(gt.get("object_target", "")).lower()
        self.target = str(gt.get("parent_target", "")).lower()
        self.lamp = str(gt.get("toggle_target", "")).lower()
        self.transform = _TRANSFORM.get(self.task_type)
        self.order = [c[len("go to "):] for c in info.get("admissible_actions", []) if c.startswith("go to ")]
        self.here: str | None = None
        self.holding: str | None = None
        self.transformed = False
        self.placed: list[str] = []      # receptacles an object of the task was put in

    def observe(self, action: str, obs: str) -> None:
        """Book-keeping after the env ran `action` (what the prompt's last step shows)."""
        if obs.strip().startswith("Nothing happens"):
            return
        if action.startswith("go to "):
            self.here = action[len("go to "):]
        elif action.startswith("take "):
            self.holding = action[len("take "):].split(" from ")[0]
        elif action.startswith(("move ", "put ")):
            if action.split(" to ")[-1] == self._first_of(self.target):
                self.placed.append(action.split(" to ")[-1])
            self.holding, self.transformed = None, False
        elif self.transform and action.startswith(self.transform + " "):
            self.transformed = True

    # ---- policy ----
    def act(self, obs: str, info: Mapping[str, Any]) -> str | None:
        adm: Sequence[str] = info.get("admissible_actions", [])
        if self.holding is None:
            if self.task_type == "pick_two_obj_and_place" and len(self.placed) >= 2:
                return None
            take = self._take(adm)
            return take or self._search(adm, self.obj)
        if receptacle_class(self.holding) != self.obj:  # picked up the wrong thing (a recovery state)
            cmd = f"move {self.holding} to {self.here}"
            return cmd if cmd in adm else None
        if self.task_type == "look_at_obj_in_light":
            use = [c for c in adm if re.fullmatch(rf"use {re.escape(self.lamp)} \d+", c)]
            return use[0] if use else self._search(adm, self.lamp, open_closed=False)
        if self.transform and not self.transformed:
            for cls in APPLIANCES[self.transform]:
                place = self._first_of(cls)
                if place is None:
                    continue
                cmd = f"{self.transform} {self.holding} with {place}"
                return cmd if cmd in adm else self._go(place, adm)
            return None
        place = self._first_of(self.target)
        if place is None:
            return None
        cmd = f"move {self.holding} to {place}"
        if cmd in adm or f"open {place}" in adm:
            return cmd if cmd in adm and f"open {place}" not in adm else f"open {place}"
        return self._go(place, adm)

    def _go(self, place: str, adm: Sequence[str]) -> str | None:
        cmd = f"go to {place}"
        return cmd if cmd in adm else None

    def _take(self, adm: Sequence[str]) -> str | None:
        pat = re.compile(rf"take {re.escape(self.obj)} \d+ from (.+)")
        for c in adm:
            m = pat.fullmatch(c)
            if m and m.group(1) not in self.placed:  # here, or a place next to it
                return c
        return None

    def _first_of(self, cls: str) -> str | None:
        return next((r for r in self.order if receptacle_class(r) == cls), None)

    def _search_order(self, wanted: str) -> list[str]:
        classes = set(self._prior_table.get(wanted, []))
        allowed = [r for r in self.order if receptacle_class(r) in classes] if classes else []
        return allowed or list(self.order)

    def _search(self, adm: Sequence[str], wanted: str, open_closed: bool = True) -> str | None:
        allowed = self._search_order(wanted)
        if self.here is not None and open_closed and self.here in allowed and f"open {self.here}" in adm:
            return f"open {self.here}"
        pos = self.order.index(self.here) if self.here in self.order else -1
        after = self.order[pos + 1:] + self.order[:pos + 1]
        # places next to this one (no 'go to' in the admissible list) are skipped: the search goes on
        return next((f"go to {r}" for r in after if r in allowed and f"go to {r}" in adm), None)


def play_sweep(env, task_id: str, max_steps: int, use_priors: bool = True) -> dict[str, Any]:
    """Play one game with the demonstrator; returns won, steps and the commands (for measuring it)."""
    demo = SweepDemonstrator(use_priors=use_priors)
    obs, info = env.reset(options={"task_id": task_id})
    demo.reset(obs, info)
    actions: list[str] = []
    won = False
    while len(actions) < max_steps:
        cmd = demo.act(obs, info)
        if cmd is None:
            break
        obs, _, term, trunc, info = env.step(cmd)
        demo.observe(cmd, obs)
        actions.append(cmd)
        if term or trunc:
            won = bool(info.get("won", False))
            break
    return {"task_id": task_id, "task_type": info.get("task_type", ""), "won": won, "actions": actions}
