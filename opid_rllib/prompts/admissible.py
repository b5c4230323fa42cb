"""Whether a command is one the env offers: in its admissible list, where free-text commands are templates.

Why its own module: the hindsight analyzer's avoidance rules and the env runner's `inadmissible_steps` metric
(a policy writing commands the game cannot use, e.g. 'take potato from microwave 1' without the instance number)
must agree on what counts.
"""

from __future__ import annotations

import re
from typing import Sequence

_TEMPLATE_SLOT = re.compile(r"<[^<>]*>|\.\.\.")


def normalize_command(action: str) -> str:
    """Lower case, single spaces: how commands are compared."""
    return " ".join((action or "").lower().split())


def matches_template(action: str, admissible: Sequence[str]) -> bool:
    """Envs list free-text commands as templates ("search[<your query>]", "<search>...</search>");
    a filled-in template is admissible."""
    for t in admissible:
        parts = _TEMPLATE_SLOT.split(t)
        if len(parts) > 1:
            pattern = ".+?".join(re.escape(p) for p in parts)
            # Keep literal tags (e.g. "<search>") as text, only "<your query>"/"..." are slots.
            tags = re.findall(r"</?[a-z_]+>", t)
            if not tags and re.fullmatch(pattern, action, flags=re.S):
                return True
            if tags and re.fullmatch(re.escape(t).replace(re.escape("..."), ".+?"), action, flags=re.S):
                return True
    return False


def is_inadmissible(action: str, admissible: Sequence[str]) -> bool:
    """True where the env lists its commands and this non-empty one is neither among them nor a filled-in
    template (compared normalized). False where the env lists none: nothing to judge by."""
    a = normalize_command(action)
    adm = [normalize_command(x) for x in admissible or ()]
    return bool(adm and a and a not in adm and not matches_template(a, adm))
