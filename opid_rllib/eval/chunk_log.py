"""A play's finished chunks, kept on disk as they end, so that a play cut short goes on from its next chunk.

Why it is exact: `play_tasks` plays chunk k with generation seed `seed + k` and fresh env resets, so a chunk's
games depend only on the weights, the settings and the chunk itself. A chunk read back is the chunk the play
would have played, and a resumed play returns the records an uninterrupted one would (only its timing differs:
`resumed_s` sums the play time of the chunks read back, so a play's time over several sittings can be told).
On SmolLM2 a 126-game play took 39-45 min on machine D, a long stretch to lose to a session's end.

One JSON line per chunk: {"key", "chunk", "task_ids", "records", "seconds"} (lines written before "seconds"
existed count 0 s). `key` is a digest of what the records depend on (weights, panel, settings, seed, student or
teacher role), so lines of another play in the same file are never read as this one's; a line cut by a kill is
skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping, Sequence


def read_lines(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every whole line of a chunk file, in file order (none where it does not exist)."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # the last line of a play killed while writing it
                    continue
                if isinstance(rec, dict):
                    rec["chunk"] = int(rec["chunk"])
                    out.append(rec)
    return out


def last_play(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of the last play a chunk file holds (the lines of its last key), in chunk order: a play's games
    read back by someone who does not know its settings (studies/play_phases.py)."""
    lines = read_lines(path)
    if not lines:
        return []
    chunks = {rec["chunk"]: rec["records"] for rec in lines if rec.get("key") == lines[-1]["key"]}
    return [r for k in sorted(chunks) for r in chunks[k]]


class ChunkLog:
    def __init__(self, path: str | os.PathLike, key: Mapping[str, Any]):
        self.path = os.fspath(path)
        self.key = hashlib.sha256(json.dumps(dict(key), sort_keys=True, default=str).encode()).hexdigest()
        self.resumed_episodes = self.resumed_steps = 0
        self.resumed_s = 0.0
        self._done: dict[int, dict] = {rec["chunk"]: rec for rec in read_lines(self.path) if rec.get("key") == self.key}

    def get(self, k: int, task_ids: Sequence[str]) -> list[dict] | None:
        """Chunk k's records if this play finished it before (same task ids), else None."""
        rec = self._done.get(k)
        if rec is None or rec["task_ids"] != [str(t) for t in task_ids]:
            return None
        self.resumed_episodes += len(rec["records"])
        self.resumed_steps += sum(int(r["length"]) for r in rec["records"])
        self.resumed_s += float(rec.get("seconds") or 0.0)
        return rec["records"]

    def add(self, k: int, task_ids: Sequence[str], records: list[dict], seconds: float = 0.0) -> list[dict]:
        """Keep chunk k (played in `seconds`); returns its records as they read back, so a played chunk and a
        resumed one are alike."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        line = json.dumps({"key": self.key, "chunk": int(k), "task_ids": [str(t) for t in task_ids],
                           "records": records, "seconds": round(float(seconds), 3)}, default=float)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        return json.loads(line)["records"]
