"""The analyzer factory: a name and plain kwargs in, an Analyzer out (so a Ray actor can build its own copy).

Why a module of its own: the implementations import base.py, so the factory that imports them lives above both,
and nothing in the package imports back up into it.
"""

from __future__ import annotations

import inspect
from typing import Any

from opid_rllib.analyzer.base import Analyzer

ANALYZER_CHOICES = ("hindsight", "openai", "azure")


def _analyzer_class(name: str | None):
    key = (name or "hindsight").strip().lower()
    if key == "hindsight":
        from opid_rllib.analyzer.hindsight import HindsightAnalyzer as cls
    elif key in ("openai", "azure"):
        from opid_rllib.analyzer.openai_backend import OpenAIAnalyzer as cls
    else:
        raise ValueError(f"analyzer name={name!r}: unknown; choices are {', '.join(ANALYZER_CHOICES)}")
    return key, cls


def analyzer_options_error(name: str | None, options: dict) -> str | None:
    """One line naming option keys the analyzer does not take (None if all are known); checked in
    OPIDConfig.validate so a typo fails before Ray starts, not inside an env runner a minute in."""
    key, cls = _analyzer_class(name)
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    return f"analyzer {key!r} got unknown option(s) {unknown}; accepted: {accepted}" if unknown else None


def make_analyzer(name: str | None = "hindsight", **cfg: Any) -> Analyzer:
    """Build an analyzer from plain kwargs (so a Ray actor can build its own copy)."""
    err = analyzer_options_error(name, cfg)
    if err:
        raise ValueError(err)
    return _analyzer_class(name)[1](**cfg)
