"""Search-R1 action protocol and exact-match reward.

Why here and not in the projection: the env must judge raw text on its own (it may receive a
whole model response or just the tag block), with the same rule the reference's projection uses:
the first complete `<search>` or `<answer>` block counts; neither kind, both kinds, or a
repeated tag is invalid.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Iterable

_TAGS = ("<search>", "</search>", "<answer>", "</answer>")
_BLOCK = {kind: re.compile(rf"<{kind}>(.*?)</{kind}>", re.DOTALL | re.IGNORECASE) for kind in ("search", "answer")}
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles a/an/the, collapse spaces."""
    s = "".join(ch for ch in str(s).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


@dataclass(frozen=True)
class ParsedAction:
    kind: str | None     # "search" | "answer" | None when invalid
    content: str
    valid: bool
    reason: str = ""     # why it is invalid (shown to the agent)


def parse_action(text: str) -> ParsedAction:
    """Parse one agent turn under the Search-R1 protocol (tags are case-insensitive)."""
    low = str(text).lower()
    counts = {t: low.count(t) for t in _TAGS}
    repeated = [t for t, c in counts.items() if c > 1]
    if repeated:
        return ParsedAction(None, "", False, f"tag {repeated[0]} appears more than once")
    has = {k: counts[f"<{k}>"] + counts[f"</{k}>"] > 0 for k in ("search", "answer")}
    if has["search"] and has["answer"]:
        return ParsedAction(None, "", False, "both <search> and <answer> appear; give exactly one")
    if not (has["search"] or has["answer"]):
        return ParsedAction(None, "", False, "no <search>...</search> or <answer>...</answer> block")
    kind = "search" if has["search"] else "answer"
    m = _BLOCK[kind].search(str(text))
    if m is None:
        return ParsedAction(None, "", False, f"incomplete <{kind}> block (open and close the tag)")
    content = " ".join(m.group(1).split())
    if not content:
        return ParsedAction(None, "", False, f"empty <{kind}> block")
    return ParsedAction(kind, content, True)
