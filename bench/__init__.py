"""Benchmarks a user runs (bench/README.md lists them). Repo tooling, not part of the installed package: run from
the repository root as `python -m bench.NAME`, which puts the root on the path, so the scripts import `opid_rllib`,
`envs` and each other from the tree even where the package is not installed (the GPU check's machine)."""
