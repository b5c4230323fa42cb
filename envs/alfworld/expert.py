"""ALFWorld's hand-coded TextWorld expert, patched and made reproducible.

Why a subclass of alfworld's `AlfredExpert` wrapper:
  * P1: alfworld 0.4.2's grammar says "move X to Y" but the expert only recognises drops from
    commands containing "put", so after a drop it still believes it holds the object and loops.
    We hand it "put X to Y" instead (only its state tracker reads this string).
  * The expert breaks ties with the module-level `random`; we swap in a per-episode
    `random.Random(seed)` around each call, so one task id always gets the same expert plan
    (and the verified step counts in specs.jsonl reproduce) without touching global state.
  * The stock wrapper raises on expert timeouts/failures; here the env keeps running and the
    plan becomes [] (unknown).
"""

from __future__ import annotations

import random

import textworld
from alfworld.agents.environment.alfred_tw_env import AlfredExpert
from alfworld.agents.expert import handcoded_expert


def expert_view_of(command: str) -> str:
    """P1 fix: the expert's state tracker needs "put" to notice a drop."""
    return "put " + command[len("move "):] if command.startswith("move ") else command


class PatchedAlfredExpert(AlfredExpert):
    def __init__(self, env=None, seed: int = 0):
        super().__init__(env=env)
        self.seed = seed
        self._rng = random.Random(seed)
        self.failed = False

    def _gather_infos(self):
        if self.failed:
            self.state["extra.expert_plan"] = []
            return
        saved = handcoded_expert.random
        handcoded_expert.random = self._rng
        try:
            super()._gather_infos()
        except Exception:  # HandCodedAgentTimeout/Failed, or a heuristic crashing on odd states
            self.failed = True
            self.state["extra.expert_plan"] = []
        finally:
            handcoded_expert.random = saved

    def step(self, command):
        self.state, reward, done = textworld.core.Wrapper.step(self, command)
        self.prev_command = expert_view_of(str(command))
        self._gather_infos()
        return self.state, reward, done

    def reset(self):
        self._rng = random.Random(self.seed)
        self.failed = False
        return super().reset()
