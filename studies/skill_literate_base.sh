#!/usr/bin/env bash
# The skill-literate tiny base of issue 13 as it was made (docs/STUDIES.md, "Measured on the tiny
# model"), then its teacher diagnostics on the whole unseen panel.
#
#   bash studies/skill_literate_base.sh [OUT_DIR]        # default runs/skill_literate; ~80 min on 2 cores
#
# Stage 1 clones the expert (330 train games, 2 epochs, 30 % of episodes with skills). Stages 2 and 3 continue
# from it on other train games (seeds 1, 2) with action-only answers, analyzer-worded step skills on DAgger-style
# recovery states and hint-following samples (a step skill naming another admissible command, which is then the
# target): the policy learns to read a named command, which OPID's teacher needs. Every stage runs all its
# epochs (no time budget) with a fixed torch thread count, so the weights do not depend on the machine's speed.
# docs/STUDIES.md's first measured base drew stage 2's hint commands uniformly; this script (verb first in both
# stages) is the base measured since, twice, on two machines, with the same success on every panel game.
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
OUT=${1:-runs/skill_literate}
PY=${PYTHON:-python}
mkdir -p "$OUT"
[ -f "$OUT/stage1/config.json" ] || "$PY" -m bench.sft_warmstart --env alfworld --train-tasks 330 --epochs 2 \
  --budget-s 0 --history-length 2 --torch-threads 1 --out "$OUT/stage1" --json "$OUT/stage1.json"
COMMON=("${SKILL_LITERATE[@]}" --epochs 2 --lr 1e-3 --torch-threads 2)
[ -f "$OUT/stage2/config.json" ] || opid-sft "${COMMON[@]}" --model "$OUT/stage1" --out "$OUT/stage2" \
  --tasks 200 --seed 1 --hint-follow-prob 0.5
[ -f "$OUT/stage3/config.json" ] || opid-sft "${COMMON[@]}" --model "$OUT/stage2" --out "$OUT/stage3" \
  --tasks 150 --seed 2 --hint-follow-prob 1.0
opid-eval "${ORACLE_PLAY[@]}" --panel alfworld/valid_unseen@v1 --model "$OUT/stage3" --max-new-tokens 48 \
  --torch-threads 2 --output "$OUT/headroom"
