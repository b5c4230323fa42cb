"""Skill headroom: the student (plain prompts) next to the teacher (oracle skill at every step).

OPID's skill term is the gradient of -KL(student || teacher), the teacher being the same model with
a skill in its prompt: it can only help where the teacher plays better. This table is the check a
user runs before paying for an analyzer: headroom = teacher - student, per column, in points.
Pure functions over two `eval_table.summarize` tables.
"""

from __future__ import annotations

from typing import Any, Mapping


def headroom(student: Mapping[str, Any], teacher: Mapping[str, Any]) -> dict[str, float | None]:
    """teacher - student success points per column (None where either has no episode)."""
    out = {}
    for c in student["columns"]:
        s, t = student["success_pct"].get(c), teacher["success_pct"].get(c)
        out[c] = None if s is None or t is None else round(t - s, 2)
    return out


def format_headroom(student: Mapping[str, Any], teacher: Mapping[str, Any]) -> str:
    """Rows: student %, teacher %, headroom (points), episodes; plus valid% and length."""
    cols = list(student["columns"])
    head = headroom(student, teacher)
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    signed = lambda v: "-" if v is None else f"{v:+.1f}"  # noqa: E731
    rows = [["", *cols, "Valid%", "Len"],
            ["student (no skills) %", *[fmt(student["success_pct"].get(c)) for c in cols],
             fmt(student.get("format_valid_pct")), fmt(student.get("mean_episode_length"))],
            ["teacher (oracle skill) %", *[fmt(teacher["success_pct"].get(c)) for c in cols],
             fmt(teacher.get("format_valid_pct")), fmt(teacher.get("mean_episode_length"))],
            ["skill headroom (points)", *[signed(head[c]) for c in cols], "", ""],
            ["episodes", *[str(student["n"].get(c, "")) if c != "Avg" else "" for c in cols], "", ""]]
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, width))) for r in rows]
    ratio = None
    s_all, t_all = student["success_pct"].get("All"), teacher["success_pct"].get("All")
    if s_all and t_all is not None:
        ratio = t_all / s_all
    sk, tk = student.get("expert_agreement_by_kind") or {}, teacher.get("expert_agreement_by_kind") or {}
    if sk and tk:
        fk = lambda d, k: fmt((d.get(k) or {}).get("pct"))  # noqa: E731
        lines.append("Agree% by the expert's next command, student / teacher: "
                     + ", ".join(f"{k} {fk(sk, k)} / {fk(tk, k)}" for k in sk))
    lines.append("teacher = the same policy with the step skill naming the expert's next action (the hindsight "
                 "analyzer's wording) at every step" + (f"; teacher/student on All = {ratio:.2f}x" if ratio else ""))
    return "\n".join(lines)
