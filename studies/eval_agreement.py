"""Re-read `opid-eval` output folders and print the student / teacher tables with agreement split by the verb of
the expert's next command (opid_rllib/paper_table.expert_agreement_by_kind), also for folders written before
that split existed.

    python -m studies.eval_agreement runs/skill_literate/headroom runs/dagger/headroom4 runs/dagger/headroom5

Why: agreement over all steps is mostly moves ('go to'); whether a policy picks the task's object up when it
sees it ('take') is what decides ALFWorld games, and it hides in the overall figure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from opid_rllib.eval.headroom import format_headroom
from opid_rllib.eval.panel import read_episodes
from opid_rllib.paper_table import format_agreement_by_kind, summarize


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", help="opid-eval --output folders (episodes.jsonl [+ teacher_episodes.jsonl])")
    ap.add_argument("--env", default="alfworld")
    args = ap.parse_args(argv)
    for d in map(Path, args.dirs):
        if not (d / "episodes.jsonl").is_file():
            print(f"eval_agreement: {d}: no episodes.jsonl (pass an opid-eval --output folder)", file=sys.stderr)
            return 2
        student = summarize(read_episodes(d / "episodes.jsonl"), args.env)
        print(f"== {d} ({student['n']['All']} episodes)")
        if (d / "teacher_episodes.jsonl").is_file():
            print(format_headroom(student, summarize(read_episodes(d / "teacher_episodes.jsonl"), args.env)))
        elif student.get("expert_agreement_by_kind"):
            print(format_agreement_by_kind(student["expert_agreement_by_kind"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
