"""Signpost: a short text env whose observation names the right command (rung 0 of the learning gate)."""
