"""Lenient extraction of the analyzer's JSON answer.

Why lenient: LLM answers arrive wrapped in markdown fences, with prose around them, with trailing
commas or as Python dict literals. Every extra recovered answer saves a retry (a paid call and
latency), and only the content rules below decide whether a parse is accepted.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Iterable, Iterator

from opid_rllib.analyzer.base import Skills


class ParseError(ValueError):
    """The model answer holds no usable analysis object."""


_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
_STEP_KEY_RE = re.compile(r"^\s*(?:step\s*)?(-?\d+)\s*$", re.IGNORECASE)
_DECODER = json.JSONDecoder(strict=False)


def _texts(text: str) -> list[str]:
    """Fenced blocks first, then the raw text; each also without trailing commas."""
    bases = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    out: list[str] = []
    for base in bases:
        for t in (base, _TRAILING_COMMA_RE.sub(r"\1", base)):
            if t not in out:
                out.append(t)
    return out


def _json_objects(text: str) -> Iterator[dict]:
    for i, ch in enumerate(text):
        if ch != "{":
            continue
        try:
            obj, _ = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):  # RecursionError: an answer nested ~1,000 deep
            continue
        if isinstance(obj, dict):
            yield obj


# Characters _balanced_slices may scan in all (about 0.2 s of Python): a scan from every "{" is quadratic, and a
# degenerate answer of 16,000 "{" took 12 s to parse, each parse attempt, without this cap.
_SCAN_BUDGET = 2_000_000


def _balanced_slices(text: str) -> Iterator[str]:
    """Every brace-balanced `{...}` slice, quote-aware (for ast.literal_eval), within _SCAN_BUDGET."""
    budget = _SCAN_BUDGET
    for start, ch in enumerate(text):
        if ch != "{":
            continue
        depth, quote, escaped = 0, "", False
        end = min(len(text), start + budget)
        budget -= end - start
        for j in range(start, end):
            c = text[j]
            if quote:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    budget += end - j - 1  # the unscanned rest goes back
                    yield text[start : j + 1]
                    break
        if budget <= 0:
            return


def _literal_objects(text: str) -> Iterator[dict]:
    for piece in _balanced_slices(text):
        try:
            obj = ast.literal_eval(piece)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield obj


def _norm_keys(obj: dict) -> dict:
    return {str(k).strip().lower(): v for k, v in obj.items()}


def extract_analysis_object(text: str) -> dict:
    """First dict with an `episode_skill` key (JSON pass, then Python-literal pass)."""
    texts = _texts(text or "")
    seen_any = False
    for finder in (_json_objects, _literal_objects):
        for t in texts:
            for obj in finder(t):
                seen_any = True
                norm = _norm_keys(obj)
                if "episode_skill" in norm:
                    return norm
    if seen_any:
        raise ParseError("found a JSON object but none has the key 'episode_skill'")
    raise ParseError("no JSON object found in the answer")


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value if _as_text(v))
    return str(value).strip()


_LETTER = re.compile(r"[^\W\d_]")


def _skill_text(value: Any, field: str) -> str:
    """A skill as the sentence it must be: a string (or a list of strings, joined); a dict, a number, a
    dict/list literal written as text or a "<placeholder>" copied from the format example is refused
    (ParseError: the repair request, then a failed analysis), so no such text reaches a prompt as a "skill"."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        value = " ".join(v.strip() for v in value if v.strip())
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    if not isinstance(value, str):
        raise ParseError(f"{field} is a {type(value).__name__}, not a sentence")
    text = value.strip()
    if text[:1] in "{[" or not _LETTER.search(text):
        raise ParseError(f"{field} is not a sentence: {text[:60]!r}")
    if text[:1] == "<" and text[-1:] == ">":
        raise ParseError(f"{field} is the format example's placeholder, not a skill: {text[:60]!r}")
    return text


def _step_index(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    if isinstance(key, float):
        return int(key) if key.is_integer() else None
    m = _STEP_KEY_RE.match(str(key))
    return int(m.group(1)) if m else None


def _step_items(raw: Any) -> Iterable[tuple[Any, Any]]:
    """Dict form, or a list of {"step": i, "skill": s} entries some models produce."""
    if isinstance(raw, dict):
        return raw.items()
    items = []
    if isinstance(raw, (list, tuple)):
        for entry in raw:
            if isinstance(entry, dict):
                e = _norm_keys(entry)
                key = next((e[k] for k in ("step", "index", "step_index") if k in e), None)
                val = next((e[k] for k in ("skill", "advice", "step_skill", "text") if k in e), None)
                if key is not None:
                    items.append((key, val))
    return items


def parse_analysis(text: str, candidates: Iterable[int] | None, max_step_skills: int) -> Skills:
    """Parse an answer into Skills or raise ParseError.

    Step keys are cast to int (others dropped), kept only if in `candidates` (None = any
    non-negative index), then truncated to the first `max_step_skills` in dict order.
    """
    obj = extract_analysis_object(text)
    episode_skill = _skill_text(obj.get("episode_skill"), "'episode_skill'")
    if not episode_skill:
        raise ParseError("'episode_skill' is empty")
    allowed = None if candidates is None else {int(c) for c in candidates}
    step_skills: dict[int, str] = {}
    for key, value in _step_items(obj.get("step_skills")):
        idx = _step_index(key)
        skill = _skill_text(value, f"step skill {key!r}")
        if idx is None or idx < 0 or not skill or idx in step_skills:
            continue
        if allowed is not None and idx not in allowed:
            continue
        if len(step_skills) >= max(0, int(max_step_skills)):
            break
        step_skills[idx] = skill
    return Skills(
        episode_summary=_as_text(obj.get("episode_summary")),
        episode_skill=episode_skill,
        step_skills=step_skills,
    )
