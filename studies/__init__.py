"""The finished full-panel learning studies of docs/STUDIES.md: their harness, drivers, probes and results.

Repo tooling, not part of the installed package: run from the repository root as `python -m studies.NAME`
(studies/README.md lists them).
"""
