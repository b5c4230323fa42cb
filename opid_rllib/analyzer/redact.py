"""Masking secrets in any text bound for logs, errors, metrics or dumps.

Why a pattern pass besides the known key: a proxy or a server may echo an Authorization header or a key
we never saw (a bearer token, an sk- key) in its error body, and error bodies reach our logs.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "***"
# Token shapes worth masking even when we do not know the exact secret (e.g. echoed by a proxy).
_TOKEN_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
)


def redact(text: Any, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Mask known secrets and bearer/sk- tokens in any text bound for logs, errors or dumps."""
    out = str(text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            out = out.replace(secret, REDACTED)
    for pat in _TOKEN_PATTERNS:
        out = pat.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, out)
    return out
