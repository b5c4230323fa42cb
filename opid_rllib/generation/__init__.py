"""Generation backends behind one small interface (the TRL-style seam)."""

from opid_rllib.generation.base import Generation, GenerationBackend, make_backend

__all__ = ["Generation", "GenerationBackend", "make_backend"]
