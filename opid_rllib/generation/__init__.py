"""Generation backends behind one small interface (the TRL-style seam)."""

from opid_rllib.generation.base import Generation, GenerationBackend
from opid_rllib.generation.registry import BACKENDS, make_backend

__all__ = ["BACKENDS", "Generation", "GenerationBackend", "make_backend"]
