"""Response text -> env action + format validity (verl-agent projection semantics).

Why validity is separate from admissibility: an inadmissible but well-formed command is a
legitimate (bad) decision the env answers with "Nothing happens."; a malformed response is what
the invalid-action penalty targets.

ALFWorld / WebShop: lower-case the response; the action is the text between the first <action>
and the next </action>; valid iff <think>, </think>, <action>, </action> all occur and the response
has no CJK characters. Without both action tags the action is the last 30 (ALFWorld) / 20
(WebShop) characters and valid is False.

SearchQA: the action is the first complete <search>q</search> or <answer>a</answer> block,
returned in canonical tag form ("<search>q</search>" / "<answer>a</answer>", inner text stripped,
case kept), which the searchqa env accepts verbatim. Invalid if there is no complete block, if
both kinds of tag occur, or if any opening/closing tag occurs more than once. An invalid response
still returns its first complete block (if any) as the action, else "".
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
                  r"\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
                  r"\U00020000-\U0002ffff]")
FALLBACK_CHARS = {"alfworld": 30, "webshop": 20, "signpost": 30}
_SEARCH_BLOCK = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def _project_think_action(text: str, fallback_chars: int) -> tuple[str, bool]:
    text = str(text).lower()
    start = text.find("<action>")
    end = text.find("</action>", start + len("<action>")) if start >= 0 else -1
    if start < 0 or end < 0:
        return text[-fallback_chars:].strip(), False
    action = text[start + len("<action>"):end].strip()
    valid = "<think>" in text and "</think>" in text and not has_cjk(text)
    return action, valid


def _project_search(text: str) -> tuple[str, bool]:
    text = str(text)
    m = _SEARCH_BLOCK.search(text)
    if m is None:
        return "", False
    action = f"<{m.group(1)}>{m.group(2).strip()}</{m.group(1)}>"
    counts = {t: text.count(t) for t in ("<search>", "</search>", "<answer>", "</answer>")}
    both_kinds = (counts["<search>"] or counts["</search>"]) and (counts["<answer>"] or counts["</answer>"])
    repeated = any(c > 1 for c in counts.values())
    return action, not (both_kinds or repeated)


def project_action(env_name: str, response_text: str) -> tuple[str, bool]:
    """(action to send to the env, response follows the required format)."""
    from opid_rllib.prompts._common import canonical_env_name

    name = canonical_env_name(env_name)
    if name == "searchqa":
        return _project_search(response_text)
    return _project_think_action(response_text, FALLBACK_CHARS[name])
