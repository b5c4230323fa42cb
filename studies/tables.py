"""docs/STUDIES.md's tables, regenerated from the result JSONs under studies/results/.

    python -m studies.tables            # rewrite each table between <!-- table:NAME --> and <!-- /table:NAME -->
    python -m studies.tables --check    # exit 1, naming the tables, when the doc differs from the JSONs,
                                        # or when a contents link (or another doc's STUDIES.md#...) has no heading

Why: the tables were copied by hand from the JSONs; generated, a figure in the doc is the figure in its record.
Each table is a TABLES entry: the results file, the column kind and the rows (label, the variant's key in the file,
bold minus-GRPO cells or not). Text around the tables stays hand-written.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
DOC = ROOT / "docs" / "STUDIES.md"
BASE = "base (no RL)"

V_ONPLAN = "opid:w_ep=0+w_step=0.3+analyzer.on_plan_step_skills=3+normalize_teacher_adv=true"
V_SWEEP = "opid:w_ep=0.3+w_step=0.3+analyzer.on_plan_step_skills=3+normalize_teacher_adv=true+teacher_sample_adv_weight=1"

TABLES = {
    "onplan_3_seeds": {
        "file": "learning_onplan.json", "kind": "all_agree_by_seed",
        "head": "126 `valid_unseen` games, All % / Agree %",
        "rows": [("base (no RL)", BASE, False), ("GRPO", "grpo", False),
                 ("OPID, on-plan step skills, centred, w = 0.3", V_ONPLAN, True),
                 ("the same, shuffled skills (control)", "opid_shuffled:" + V_ONPLAN[len("opid:"):], True),
                 ("OPID without step skills: the episode skill at every step, centred, w = 0.3",
                  "no_step_skill:w_ep=0.3+normalize_teacher_adv=true", True)],
    },
}


def _f(x: float) -> str:
    """One decimal, halves rounded up as the hand-copied tables did (22.65 -> 22.7; float formatting gives 22.6)."""
    return str(Decimal(str(round(x, 6))).quantize(Decimal("0.1"), ROUND_HALF_UP))


def _signed(x: float) -> str:
    s = _f(x)
    return "+0.0" if s in ("0.0", "-0.0") else s if s.startswith("-") else "+" + s


def _all(res: dict, variant: str, seed: str) -> float:
    return res["per_seed"][variant][seed]["All"]


def all_agree_by_seed(res: dict, spec: dict) -> list[str]:
    """All % / agreement % per seed, then (variant - GRPO) on both, averaged over the seeds."""
    seeds = [str(s) for s in res["seeds"]]
    agree = res["per_seed_agreement_pct"]
    lines = [f"| {spec['head']} | " + " | ".join(f"seed {s}" for s in seeds) + " | minus GRPO, mean (All / Agree) |",
             "|" + "---|" * (len(seeds) + 2)]
    for label, variant, bold in spec["rows"]:
        cells = [f"{_f(_all(res, variant, s))} / {_f(agree[variant][s])}" for s in seeds]
        diff = ""
        if variant not in ("grpo", BASE):
            d_all = statistics.mean(_all(res, variant, s) - _all(res, "grpo", s) for s in seeds)
            d_agree = statistics.mean(agree[variant][s] - agree["grpo"][s] for s in seeds)
            diff = f"{_signed(d_all)} / {_signed(d_agree)}"
            diff = f"**{diff}**" if bold else diff
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {diff} |".replace("|  |", "| |"))
    return lines


KINDS = {"all_agree_by_seed": all_agree_by_seed}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def broken_links(text: str) -> list[str]:
    """The doc's own `](#anchor)` links (its contents) and other docs' `STUDIES.md#anchor` links with no heading."""
    have = anchors(text)
    links = [f"STUDIES.md#{a}" for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in have]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("*/README.md"))]:
        links += [f"{doc.relative_to(ROOT)}: STUDIES.md#{a}" for a in re.findall(r"STUDIES\.md#([\w\-]+)", doc.read_text())
                  if a not in have]
    return links


def render(name: str) -> str:
    spec = TABLES[name]
    res = json.loads((RESULTS / spec["file"]).read_text())
    return "\n".join(KINDS[spec["kind"]](res, spec))


def regenerate(text: str) -> tuple[str, list[str]]:
    """The doc with every marked table rendered again, and the names of those that changed."""
    changed = []

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise SystemExit(f"docs/STUDIES.md: no table named {name!r} in studies/tables.py")
        new = f"<!-- table:{name} -->\n{render(name)}\n<!-- /table:{name} -->"
        if new != m.group(0):
            changed.append(name)
        return new

    out = re.sub(r"<!-- table:(\w+) -->\n.*?<!-- /table:\1 -->", sub, text, flags=re.S)
    missing = sorted(set(TABLES) - set(re.findall(r"<!-- table:(\w+) -->", text)))
    if missing:
        raise SystemExit(f"docs/STUDIES.md has no markers for {missing}")
    return out, changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="fail when docs/STUDIES.md's tables differ from the JSONs")
    p.add_argument("--doc", type=Path, default=DOC)
    args = p.parse_args(argv)
    text = args.doc.read_text()
    new, changed = regenerate(text)
    if args.check:
        broken = broken_links(text)
        if broken:
            print(f"{args.doc}: links to no heading: {broken}", file=sys.stderr)
            return 1
        if changed:
            print(f"{args.doc}: stale tables {changed}: run python -m studies.tables", file=sys.stderr)
            return 1
        print(f"{args.doc}: {len(TABLES)} tables match their JSONs")
        return 0
    if changed:
        args.doc.write_text(new)
    print(f"{args.doc}: rewrote {changed or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
