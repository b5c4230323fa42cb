"""Runnable configs (tuned_examples/README.md). Repo tooling, not part of the installed package: the GPU recipes
share `_reference_scale.py`, so they run from the repository root as `python -m tuned_examples.NAME`."""
