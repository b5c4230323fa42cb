"""The paper's results table from per-episode records: pure functions, no model, no env.

Follows the reference's eval script (opid_reference.md section 7): success % per ALFWorld category
(Pick, Look, Clean, Heat, Cool, Pick2), their macro average "Avg", overall success "All", plus the
format-valid rate (fraction of steps whose response passed the projection) and the mean episode
length, and, where the env has an expert plan, agreement with it: the share of steps whose command is
the expert's next one (resolves a moving policy over ~3,800 panel steps where success over 126 games cannot).
Other envs get one column per task_type (WebShop category, search-QA hop kind / source
dataset); WebShop also reports the mean final score.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

# ALFWorld task_type -> the paper's column name, in the paper's column order.
ALFWORLD_COLUMNS = {
    "pick_and_place_simple": "Pick",
    "look_at_obj_in_light": "Look",
    "pick_clean_then_place_in_recep": "Clean",
    "pick_heat_then_place_in_recep": "Heat",
    "pick_cool_then_place_in_recep": "Cool",
    "pick_two_obj_and_place": "Pick2",
}
OTHER_COLUMN = "Other"


def _pct(num: float, den: int) -> float | None:
    return round(100.0 * num / den, 2) if den else None


def command_kind(command: str) -> str:
    """The verb of a command ('go to' for moves): 'take pen 1 from desk 1' -> 'take', '<search>q</search>'
    -> 'search', 'click[Buy Now]' -> 'click'."""
    m = re.match(r"\W*([a-z]+)", " ".join(str(command).lower().split()))
    if not m:
        return "other"
    return "go to" if m.group(1) == "go" else m.group(1)


def _agreement_counts(env_name: str, records: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """{kind of the expert's next command: [steps agreeing, steps with that plan]}."""
    from opid_rllib.prompts.commands import same_action

    counts: dict[str, list[int]] = {}
    for r in records:
        plans = r.get("expert_next") or []
        for plan, action, valid in zip(plans, r.get("actions", []), r.get("format_valid", [])):
            if plan is None:
                continue
            c = counts.setdefault(command_kind(plan), [0, 0])
            c[0] += int(bool(valid) and same_action(env_name, action, plan))
            c[1] += 1
    return counts


def expert_agreement(env_name: str, records: Sequence[Mapping[str, Any]]) -> float | None:
    """Valid steps whose command equals the env expert's next one, over the steps where it had a plan
    (None without a plan)."""
    counts = _agreement_counts(env_name, records).values()
    planned = sum(n for _, n in counts)
    return sum(a for a, _ in counts) / planned if planned else None


def expert_agreement_by_kind(env_name: str, records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Agreement split by the verb of the expert's next command ({kind: {"pct", "steps"}}, most planned first).
    Why: the overall figure is dominated by moves; a policy that walks to the right place but never picks
    the task's object up ('take' at a few %) cannot win, however well it moves."""
    counts = sorted(_agreement_counts(env_name, records).items(), key=lambda kv: (-kv[1][1], kv[0]))
    return {k: {"pct": _pct(a, n), "steps": n} for k, (a, n) in counts}


def summarize(records: Sequence[Mapping[str, Any]], env: str) -> dict[str, Any]:
    """The paper's table from per-episode records (pure function).

    success_pct[col] is None for a category with no episode; Avg is the macro mean over the
    categories that have episodes; All is the success over all episodes.
    """
    if env == "alfworld":
        cols = list(ALFWORLD_COLUMNS.values())
        col_of = lambda tt: ALFWORLD_COLUMNS.get(tt, OTHER_COLUMN)  # noqa: E731
        if any(r.get("task_type") not in ALFWORLD_COLUMNS for r in records):
            cols.append(OTHER_COLUMN)
    else:
        cols = sorted({str(r.get("task_type") or "unknown") for r in records})
        col_of = lambda tt: str(tt or "unknown")  # noqa: E731
    won = {c: 0 for c in cols}
    n = {c: 0 for c in cols}
    for r in records:
        c = col_of(r.get("task_type"))
        n[c] += 1
        won[c] += bool(r["won"])
    success = {c: _pct(won[c], n[c]) for c in cols}
    present = [success[c] for c in cols if n[c]]
    success["Avg"] = round(sum(present) / len(present), 2) if present else None
    success["All"] = _pct(sum(bool(r["won"]) for r in records), len(records))
    n["Avg"] = sum(1 for c in cols if n[c])  # number of categories averaged
    n["All"] = len(records)
    fv = [bool(v) for r in records for v in r.get("format_valid", [])]
    lengths = [int(r["length"]) for r in records]
    table: dict[str, Any] = {
        "columns": cols + ["Avg", "All"],
        "success_pct": success,
        "n": n,
        "format_valid_pct": _pct(sum(fv), len(fv)),
        "mean_episode_length": round(sum(lengths) / len(lengths), 3) if lengths else None,
    }
    agreement = expert_agreement(env, records)
    if agreement is not None:
        table["expert_agreement_pct"] = round(100.0 * agreement, 2)
        table["expert_agreement_by_kind"] = expert_agreement_by_kind(env, records)
    scores = [float(r["score"]) for r in records if r.get("score") is not None]
    if scores:
        table["mean_score"] = round(sum(scores) / len(scores), 4)
    return table


def _fmt(v, nd=1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def format_agreement_by_kind(by_kind: Mapping[str, Mapping[str, Any]]) -> str:
    """One line: 'Agree% by the expert's next command: go to 14.0 (2372 steps), take 3.1 (360), ...'."""
    parts = [f"{k} {_fmt(v['pct'])} ({v['steps']}{' steps' if i == 0 else ''})"
             for i, (k, v) in enumerate(by_kind.items())]
    return "Agree% by the expert's next command: " + ", ".join(parts)


def format_table(results: Mapping[str, Any]) -> str:
    """Plain-text aligned table: one success row (%) and one episode-count row."""
    t = results["table"]
    c = results.get("config", {})
    cols = list(t["columns"])
    extra = [("Valid%", t.get("format_valid_pct"), 1), ("Len", t.get("mean_episode_length"), 2)]
    if "mean_score" in t:
        extra.insert(0, ("Score", t["mean_score"], 3))
    if "expert_agreement_pct" in t:
        extra.append(("Agree%", t["expert_agreement_pct"], 1))
    header = ["", *cols, *[e[0] for e in extra]]
    row_s = ["success %", *[_fmt(t["success_pct"].get(k)) for k in cols], *[_fmt(v, nd) for _, v, nd in extra]]
    row_n = ["episodes", *[_fmt(t["n"].get(k)) if k != "Avg" else "" for k in cols], *["" for _ in extra]]
    width = [max(len(a), len(b), len(h)) for h, a, b in zip(header, row_s, row_n)]
    line = lambda cells: "  ".join(  # noqa: E731
        (x.ljust(w) if i == 0 else x.rjust(w)) for i, (x, w) in enumerate(zip(cells, width)))
    greedy = " (greedy)" if c.get("greedy") else ""
    title = (f"{c.get('panel', '?')} [sha256 {str(c.get('panel_sha256', ''))[:12]}]  model={c.get('model', '?')}  "
             f"T={c.get('temperature', '?')}{greedy}  seed={c.get('seed', '?')}  episodes={t['n'].get('All')}")
    out = [title, line(header), line(row_s), line(row_n),
           "Avg = mean over categories with episodes; All = over all episodes; "
           "Valid% = format-valid steps / all steps; Len = mean steps per episode"
           + ("; Agree% = steps taking the expert's next command / steps with a plan"
              if "expert_agreement_pct" in t else "")]
    if t.get("expert_agreement_by_kind"):
        out.append(format_agreement_by_kind(t["expert_agreement_by_kind"]))
    timing = results.get("timing", {})
    if timing:
        out.append(f"wall {timing.get('wall_s', 0):.1f} s (load {timing.get('load_s', 0):.1f} s, "
                   f"rollout {timing.get('rollout_s', 0):.1f} s)")
    return "\n".join(out)
