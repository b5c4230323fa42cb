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


def env_kwargs_arg(text: str | None) -> dict:
    """--env-kwargs as a dict ({} when not given); ValueError for a key that has its own flag (split, max_steps),
    which the command's records and messages name and --env-kwargs would override unseen."""
    env_kwargs = {} if text is None else json_object_arg("--env-kwargs", text)
    own = sorted(set(env_kwargs) & {"split", "max_steps"})
    if own:
        raise ValueError(f"--env-kwargs: {own[0]!r} has its own flag; use --{own[0].replace('_', '-')}")
    return env_kwargs


def key_value_args(flag: str, items) -> dict:
    """Repeated KEY=VALUE flags (e.g. --analyzer-option) as a dict; VALUE as JSON when it parses (3, 0.5, true),
    else as text. ValueError naming the flag for an item without '=' or key."""
    out = {}
    for item in items or ():
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{flag} {item!r}: must be KEY=VALUE, e.g. on_plan_step_skills=3")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def warn_slow_dtype(prog: str, dtype: str | None, on_cpu: bool | None = None) -> None:
    """Print opid_rllib.hardware's bf16 warning to stderr before the work starts (on_cpu: default no CUDA)."""
    import sys

    from opid_rllib.hardware import bf16_cpu_warning

    if on_cpu is None:
        import torch

        on_cpu = not torch.cuda.is_available()
    msg = bf16_cpu_warning(dtype or "float32", on_cpu=on_cpu)
    if msg:
        print(f"{prog}: {msg}", file=sys.stderr, flush=True)
