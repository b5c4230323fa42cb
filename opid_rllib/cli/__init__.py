"""Console scripts: opid-train, opid-eval, opid-sft, opid-export."""

from __future__ import annotations

import json


def json_object_arg(flag: str, text: str) -> dict:
    """A JSON-object command-line value (e.g. --env-kwargs); ValueError naming the flag otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{flag} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be a JSON object, e.g. '{{\"expert\": \"sweep\"}}'")
    return value
