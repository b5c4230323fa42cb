"""The on-disk model cache shared by the tiny builder and the SmolLM2 converter."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


class ModelResolutionError(RuntimeError):
    """A model spec could not be turned into a local folder (message says what to do)."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("OPID_CACHE_DIR") or Path.home() / ".cache" / "opid_rllib")



@contextlib.contextmanager
def quiet_progress():
    """transformers' progress bars off for the block (restored after): loading and saving a small model
    ("Loading weights", "Writing model shards") takes under a second, and the bars bury a CLI's own lines."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _build_cached(final: Path, builder) -> Path:
    """Build into a temp sibling and rename into place; a racing process that loses the rename
    discards its copy and uses the winner's folder."""
    if (final / "config.json").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
    try:
        with quiet_progress():  # a first build must not add progress bars to a CLI's one-line errors
            builder(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp/safetensors make 0700/0600; the cache is shared
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "config.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
