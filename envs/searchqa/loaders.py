"""Load real QA sets in the layouts Search-R1 users already have on disk.

Why: the synthetic world is for offline work; published numbers use NQ, TriviaQA, PopQA,
HotpotQA, 2Wiki, MuSiQue and Bamboogle as Search-R1 prepared them. Accepted layouts (parquet
or jsonl), detected per row:
  * FlashRAG / Search-R1 raw:   id?, question, golden_answers, data_source?
  * Search-R1 processed parquet: data_source, prompt (chat messages ending "Question: ..."),
                                 reward_model.ground_truth.target, extra_info
  * verl-agent processed:        extra_info.question / env_kwargs.{question, ground_truth}
"""

from __future__ import annotations

import json
import os
from typing import Any

from .corpus import Question


def _answers(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, dict):  # Search-R1: {"target": [...]}
        return _answers(v.get("target", v.get("ground_truth")))
    if isinstance(v, str):
        return [v]
    if hasattr(v, "tolist"):
        v = v.tolist()
    return [str(a) for a in v if a is not None and str(a).strip()]


def _question_from_prompt(prompt: Any) -> str:
    if isinstance(prompt, str):
        text = prompt
    else:
        users = [m.get("content", "") for m in (prompt or []) if isinstance(m, dict) and m.get("role") == "user"]
        text = users[-1] if users else ""
    if "Question:" in text:
        text = text.rsplit("Question:", 1)[1]
    return text.strip()


def _row_to_fields(row: dict) -> tuple[str, list[str], str | None]:
    extra = row.get("extra_info") or {}
    envkw = row.get("env_kwargs") or {}
    rm = row.get("reward_model") or {}
    question = (row.get("question") or extra.get("question") or envkw.get("question")
                or _question_from_prompt(row.get("prompt")))
    answers = _answers(row.get("golden_answers"))
    if not answers and isinstance(rm, dict):
        answers = _answers(rm.get("ground_truth"))
    if not answers:
        answers = _answers(envkw.get("ground_truth"))
    source = row.get("data_source") or envkw.get("data_source")
    return str(question).strip(), answers, (str(source) if source else None)


def read_rows(path: str) -> list[dict]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq  # pyarrow comes with ray

        return pq.read_table(path).to_pylist()
    if path.endswith((".jsonl", ".json")):
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    raise ValueError(f"data_file={path!r}: expected .parquet or .jsonl")


def load_questions(path: str, data_source: str | None = None, limit: int | None = None) -> list[Question]:
    """Questions of a Search-R1/FlashRAG file as `Question`s (task_type = data source).

    task_id = "<source>-<id column or row number>"; rows without a question or an answer are
    skipped (counted in the error if nothing is left).
    """
    path = os.path.expanduser(path)
    default_source = data_source or os.path.splitext(os.path.basename(path))[0]
    out: list[Question] = []
    seen: set[str] = set()
    skipped = 0
    for i, row in enumerate(read_rows(path)):
        question, answers, source = _row_to_fields(row)
        if not question or not answers:
            skipped += 1
            continue
        source = data_source or source or default_source
        tid = f"{source}-{row['id']}" if row.get("id") not in (None, "") else f"{source}-{i:06d}"
        if tid in seen:
            tid = f"{tid}#{i}"
        seen.add(tid)
        out.append(Question(task_id=tid, question=question, answers=tuple(answers), task_type=source))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"data_file={path!r}: no usable rows (skipped {skipped} without question/answers); "
                         "expected columns question+golden_answers or Search-R1's prompt+reward_model")
    return out
