"""What the policy does where the expert's next command is a 'take', from an opid-eval output folder.

Why: the agreement split says 'take' is where the tiny model fails; this says how. At every step whose
expert_next is 'take X N from Y', the policy's command is counted as the same command, a take of the same
class of object (other number or place), a take of another class, or another kind of command; student
(episodes.jsonl) and, after --skills oracle, teacher (teacher_episodes.jsonl), whose prompt named the
expert's take.

    python -m studies.take_errors OPID_EVAL_OUTPUT_DIR [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from opid_rllib.eval.panel import read_plays
from opid_rllib.paper_table import command_kind


def _object_class(take: str) -> str:
    """'take book 1 from bed 1' -> 'book'."""
    return take.split(" from ")[0].split()[1] if len(take.split()) > 1 else ""


def take_outcomes(episodes) -> dict[str, int]:
    counts = {"take_states": 0, "same": 0, "same_class": 0, "other_class": 0, "other_kind": 0}
    for e in episodes:
        for action, plan in zip(e.get("actions", []), e.get("expert_next", [])):
            if command_kind(plan) != "take":
                continue
            counts["take_states"] += 1
            action = " ".join(action.split())
            if action == plan:
                counts["same"] += 1
            elif command_kind(action) != "take":
                counts["other_kind"] += 1
            else:
                counts["same_class" if _object_class(action) == _object_class(plan) else "other_class"] += 1
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="an opid-eval --output folder")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    out = {role: take_outcomes(eps) for role, eps in read_plays(args.folder).items()}
    for role, c in out.items():
        n = max(1, c["take_states"])
        print(f"{role}: {c['take_states']} steps where the expert takes; same command {100 * c['same'] / n:.1f} %, "
              f"a take of the same class (other number or place) {100 * c['same_class'] / n:.1f} %, of another "
              f"class {100 * c['other_class'] / n:.1f} %, another command {100 * c['other_kind'] / n:.1f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
