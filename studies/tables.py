"""docs/STUDIES.md's tables, regenerated from the result JSONs under studies/results/ (the speed tables: bench/results/).

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
V_T = "opid:w_ep=0+w_step=0.3+analyzer.on_plan_step_skills=3+normalize_teacher_adv=true+teacher_sample_adv_weight=1"
ARM_HEAD = "| arm | All | per seed | agreement | minus GRPO on All, per seed |"
TYPES_HEAD = "| valid_unseen success %, seed 0 | Pick | Look | Clean | Heat | Cool | Pick2 | All | minus GRPO |"

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
    "nohint_3_seeds": {
        "file": "learning_nohint.json", "kind": "all_by_seed", "head": ARM_HEAD,
        "rows": [("base (no RL)", BASE, False), ("GRPO", "grpo", False),
                 ("T (teacher samples, step skills at w 0.3)", V_T, False),
                 ("T with shuffled skills", V_T + "+shuffle_skills=true", False)],
    },
    "protocol_nohint": {
        "file": "learning.json", "kind": "all_by_seed", "head": ARM_HEAD,
        "rows": [("base (no RL)", BASE, False), ("GRPO", "grpo", False),
                 ("OPID at the reference weights (the `opid` preset, 0.001 each)", "opid", False),
                 ("**OPID at the sweep's weights** (0.3, 0.3; on-plan step skills, centred, teacher samples)",
                  V_SWEEP, True),
                 ("the same, shuffled skills (control)", V_SWEEP + "+shuffle_skills=true", False),
                 ("the same without step skills (episode skill, w 0.3, centred)",
                  "no_step_skill:w_ep=0.3+normalize_teacher_adv=true", False),
                 # another study's arm, from its own results file (its GRPO runs are the same cached runs)
                 ("for comparison: T of the study above (w_ep = 0, otherwise the sweep's arm; "
                  "`learning_nohint.json`)", V_T, False, "learning_nohint.json")],
    },
    "teacher_samples_3_seeds": {
        "file": "learning_teacher_samples.json", "kind": "seed_rows",
        "head": "| seed | base (no RL) | GRPO | T (teacher samples) | S (T, shuffled skills) |",
        "columns": [(BASE, False), ("grpo", False), (V_T, True), ("opid_shuffled:" + V_T[len("opid:"):], False)],
    },
    # two one-seed runs whose learning.json a later run overwrote, restored from git history under names outside
    # studies/comparisons.py's learning*.json (its ledger is of the 3-seed studies)
    "stage3_seed0": {
        "file": "stage3_s0_learning.json", "kind": "types_by_arm", "head": TYPES_HEAD,
        "rows": [("base (stage 3, no RL)", BASE, False), ("GRPO", "grpo", False),
                 ("OPID, reference weights 0.001", "opid", False), ("OPID, both skill weights 0.1", "opid:w=0.1", True),
                 ("OPID 0.1, shuffled skills (control)", "opid_shuffled:w=0.1", True)],
    },
    "protocol_rebuilt_seed0": {
        "file": "rebuilt_s0_learning.json", "kind": "types_by_arm", "head": TYPES_HEAD,
        "rows": [("base (rebuilt, no RL)", BASE, False), ("GRPO", "grpo", False),
                 ("OPID, both skill weights 0.1 (largest tied sweep point)", "opid:w_ep=0.1+w_step=0.1", True),
                 ("OPID 0.1, shuffled skills (control)", "opid_shuffled:w_ep=0.1+w_step=0.1", True)],
    },
    "smollm2_headroom_unseen": {
        "kind": "headroom_by_type",
        "head": "| valid_unseen success % | Pick | Look | Clean | Heat | Cool | Pick2 | All | takes the sweep's next command |",
        "plays": [("1 epoch", "headroom_smollm2_t120_e1_unseen.json"), ("2 epochs", "headroom_smollm2_t120_unseen.json")],
    },
    "panel_speed": {
        "file": "bench/results/eval_speed.json", "kind": "speed_rows",
        "head": "| first 32 `valid_unseen` games, 30 steps each | rollout s | ratio |",
        "rows": [("before: reasoned answers (stage 1), 64-row generation chunks", "before gen_batch=64 batch_envs=16", False),
                 ("reasoned answers, 8-row length-sorted chunks", "before gen_batch=8 batch_envs=16", False),
                 ("action-only answers (stage 3), 64-row chunks", "after gen_batch=64 batch_envs=16", False),
                 ("**after: action-only answers, 8-row length-sorted chunks (the CPU default now)**",
                  "after gen_batch=8 batch_envs=16", True)],
    },
    "dtype_speed_d": {
        "file": "bench/results/dtype_speed.json", "kind": "dtype_rows",
        "head": "| machine D, 1 thread, medians of 2 interleaved rounds | float32 s | bfloat16 s | ratio |",
        "rows": [("sft", "SFT: one epoch on 20 sweep games' demos (final loss 0.058 both)"),
                 ("rl", "RL: one iteration of T from stage 5 (16 episodes of 15 steps; learner part 55.9 against 33.5 s)"),
                 ("play", "panel: the first 32 `valid_unseen` games (2 wins each, 922 and 921 steps)")],
    },
    "dtype_speed_avx2": {
        "file": "bench/results/dtype_speed_avx2.json", "kind": "dtype_rows",
        "head": "| AVX2-only EPYC, 1 thread, medians of 2 interleaved rounds | float32 s | bfloat16 s | ratio |",
        "rows": [("sft", "SFT: one epoch on 5 sweep games' demos (final loss 4.602 and 4.599)"),
                 ("play", "panel: the first 4 `valid_unseen` games (0 wins, 120 steps each)")],
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


def _mean_f(xs) -> str:
    return _f(statistics.mean(xs))


def all_by_seed(res: dict, spec: dict) -> list[str]:
    """Per arm: All % (mean over the seeds), each seed's All %, agreement % (mean), (arm - GRPO) on All per seed.
    A row may name another results file (its fourth item) for an arm of another study; it is set against that file's
    GRPO."""
    lines = [spec["head"], "|---|---|---|---|---|"]
    for label, variant, bold, *other in spec["rows"]:
        r = json.loads((RESULTS / other[0]).read_text()) if other else res
        seeds = [str(s) for s in r["seeds"]]
        alls = [_all(r, variant, s) for s in seeds]
        agree = _mean_f(r["per_seed_agreement_pct"][variant][s] for s in seeds)
        mean_all = f"**{_mean_f(alls)}**" if bold else _mean_f(alls)
        diff = ""
        if variant not in ("grpo", BASE):
            ds = [_all(r, variant, s) - _all(r, "grpo", s) for s in seeds]
            m = _signed(statistics.mean(ds))
            diff = ", ".join(_signed(d) for d in ds) + f" (mean {'**' + m + '**' if bold else m})"
        lines.append(f"| {label} | {mean_all} | {', '.join(_f(a) for a in alls)} | {agree} | {diff} |"
                     .replace("|  |", "| |"))
    return lines


def seed_rows(res: dict, spec: dict) -> list[str]:
    """One row per seed and a mean row; a cell per arm, All % / agreement %."""
    seeds = [str(s) for s in res["seeds"]]
    agree = res["per_seed_agreement_pct"]
    lines = [spec["head"], "|" + "---|" * (len(spec["columns"]) + 1)]

    def cell(a: float, g: float, bold: bool) -> str:
        return f"{_f(a)} / " + (f"**{_f(g)}**" if bold else _f(g))

    for s in seeds:
        lines.append(f"| {s} | " + " | ".join(cell(_all(res, v, s), agree[v][s], b) for v, b in spec["columns"]) + " |")
    lines.append("| mean | " + " | ".join(cell(statistics.mean(_all(res, v, s) for s in seeds),
                                                statistics.mean(agree[v][s] for s in seeds), b)
                                           for v, b in spec["columns"]) + " |")
    return lines


TYPES = ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2", "All")


def headroom_by_type(res: dict, spec: dict) -> list[str]:
    """Per play (a headroom_*.json of studies/smollm2_headroom.sh): student, teacher and headroom by task type."""
    lines = [spec["head"], "|" + "---|" * (len(TYPES) + 2)]
    for name, file in spec["plays"]:
        play = json.loads((RESULTS / file).read_text())["play"]
        for who, table in (("student (no skills)", play["table"]), ("teacher (oracle step skill at every step)",
                                                                    play["teacher_table"])):
            pct = table["success_pct"]
            cells = [_f(pct[k]) for k in TYPES[:-1]] + [f"**{_f(pct['All'])}**"]
            lines.append(f"| {name}: {who} | " + " | ".join(cells) + f" | {_f(table['expert_agreement_pct'])} % of steps |")
        cells = [_signed(play["headroom"][k]) for k in TYPES[:-1]] + [f"**{_signed(play['headroom']['All'])}**"]
        lines.append(f"| {name}: skill headroom (points) | " + " | ".join(cells) + " | |")
    return lines


def types_by_arm(res: dict, spec: dict) -> list[str]:
    """A one-seed run: per arm, success % by task type (a type with no win: 0) and All, then (arm - GRPO) on All."""
    seed = str(res["seeds"][0])
    lines = [spec["head"], "|" + "---|" * (len(TYPES) + 2)]
    for label, variant, bold in spec["rows"]:
        pct = res["per_seed"][variant][seed]
        cells = ["0" if pct[k] == 0 else _f(pct[k]) for k in TYPES[:-1]] + [_f(pct["All"])]
        diff = ""
        if variant not in ("grpo", BASE):
            diff = _signed(pct["All"] - _all(res, "grpo", seed))
            diff = f"**{diff}**" if bold else diff
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {diff} |".replace("|  |", "| |"))
    return lines


def speed_rows(res: dict, spec: dict) -> list[str]:
    """bench/eval_speed.py's rows: the median rollout seconds and their ratio to the first row."""
    rows = {r["configuration"]: r for r in res["rows"]}
    lines = [spec["head"], "|---|---|---|"]
    for label, key, bold in spec["rows"]:
        s, ratio = f"{rows[key]['median_rollout_s']:.1f}", f"{rows[key]['ratio_to_first']:.2f}"
        lines.append(f"| {label} | **{s}** | **{ratio}** |" if bold else f"| {label} | {s} | {ratio} |")
    return lines


def dtype_rows(res: dict, spec: dict) -> list[str]:
    """bench/dtype_speed.py's rows: per part, float32's and bfloat16's median seconds and their ratio (the labels,
    with the parts' losses, wins and steps, are hand-written)."""
    med = {(r["part"], r["dtype"]): r for r in res["rows"]}
    lines = [spec["head"], "|---|---|---|---|"]
    for part, label in spec["rows"]:
        f32, bf16 = med[(part, "float32")], med[(part, "bfloat16")]
        lines.append(f"| {label} | {_f(f32['median_s'])} | {_f(bf16['median_s'])} | {bf16['ratio_to_first']:.2f} |")
    return lines


KINDS = {"dtype_rows": dtype_rows, "all_agree_by_seed": all_agree_by_seed, "all_by_seed": all_by_seed, "seed_rows": seed_rows,
         "headroom_by_type": headroom_by_type, "types_by_arm": types_by_arm, "speed_rows": speed_rows}


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
    file = spec.get("file")  # under studies/results/, or a path from the repository root (bench/results/...)
    res = json.loads(((ROOT if "/" in file else RESULTS) / file).read_text()) if file else {}
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
