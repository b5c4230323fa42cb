"""How often the policy repeats its previous command, from an opid-eval output folder.

Why: the tiny students play to the 30-step cap; their episodes show the same command again and again ('go to
drawer 5' seven times, 'use floorlamp 1' for 29 steps), which in ALFWorld mostly changes nothing. This counts,
for student (episodes.jsonl) and, after --skills oracle, teacher (teacher_episodes.jsonl): the share of steps
that repeat the step before, the share of episodes with a run of 3 or more equal commands, and the repeated
steps by command kind. A studies/learning.py or studies/smollm2_study.sh run folder works too: its panel play
(play_chunks.jsonl, the last play it holds) counts as the student.

    python -m studies.repeats OPID_EVAL_OUTPUT_DIR|RUN_FOLDER [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from opid_rllib.eval.chunk_log import last_play
from opid_rllib.eval.panel import read_plays
from opid_rllib.paper_table import command_kind

from studies.study_job import PLAY_CHUNKS  # a run folder's panel play


def repeat_stats(episodes, run: int = 3) -> dict:
    """Steps equal to the step before (whitespace-normalised), episodes with `run`+ equal commands in a row."""
    steps = repeats = with_run = 0
    kinds: Counter = Counter()
    for e in episodes:
        acts = [" ".join(str(a).split()) for a in e.get("actions", [])]
        steps += len(acts)
        longest = length = 1 if acts else 0
        for prev, cur in zip(acts, acts[1:]):
            length = length + 1 if cur == prev else 1
            longest = max(longest, length)
            if cur == prev:
                repeats += 1
                kinds[command_kind(cur)] += 1
        with_run += longest >= run
    return {"episodes": len(episodes), "steps": steps, "repeat_steps": repeats,
            "repeat_step_pct": round(100 * repeats / max(1, steps), 1),
            "episodes_with_run_pct": round(100 * with_run / max(1, len(episodes)), 1),
            "repeats_by_kind": dict(kinds.most_common())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="an opid-eval --output folder, or a study run folder with play_chunks.jsonl")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    plays = read_plays(args.folder)
    chunks = Path(args.folder) / PLAY_CHUNKS
    if not plays and chunks.exists():
        plays = {"student": last_play(chunks)}
    if not plays:
        raise SystemExit(f"{args.folder}: no episodes.jsonl (write one with opid-eval --output DIR) "
                         f"and no {PLAY_CHUNKS} (a study run folder's panel play)")
    out = {role: repeat_stats(eps) for role, eps in plays.items()}
    for role, c in out.items():
        kinds = ", ".join(f"{k} {v}" for k, v in c["repeats_by_kind"].items())
        print(f"{role}: {c['steps']} steps in {c['episodes']} episodes; {c['repeat_step_pct']} % repeat the command "
              f"before ({kinds}); {c['episodes_with_run_pct']} % of episodes have 3+ equal commands in a row")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
