"""Suite-wide settings: one model/game cache for the whole run, quiet Ray."""

import os
from pathlib import Path

# Built artefacts (tiny model, generated games) are cached once per checkout, not per test.
os.environ.setdefault("OPID_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "opid"))
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
