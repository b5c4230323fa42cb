"""What a model folder holds, by content: a fingerprint of its weight files, recorded with every panel play
(opid-eval's results.json) and every study (studies/learning.py), so that a record made from other weights is
told apart from one made from these, whatever path either was read from."""

from __future__ import annotations

import glob
import hashlib
import os


def weights_fingerprint(model: str) -> str:
    """What a study's runs start from, by content: sha256 over a local model folder's weight files (name and
    bytes, in name order), so a warm start rebuilt on a fresh machine (another path, or the same path holding
    other weights) is told apart from the one a folder's runs were made with; a hub name stands for itself."""
    files = sorted(glob.glob(os.path.join(model, "*.safetensors")) + glob.glob(os.path.join(model, "*.bin")))
    if not files:
        return f"name:{model}"
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                h.update(block)
    return "sha256:" + h.hexdigest()
