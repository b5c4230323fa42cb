#!/usr/bin/env bash
# DAgger rounds on top of the skill-literate base (issue 13, section 2: a student that wins 10-30 %).
# Each round the previous model plays 300 train games (`opid-sft --policy-tasks 300`), the env's expert labels
# every distinct state it reached, and the model is fine-tuned on those samples plus 100 games of expert demos
# (same settings as studies/skill_literate_base.sh's stages 2-3, hint-following samples at 0.5 on both); then the
# unseen panel is played as student and as oracle-skill teacher. docs/STUDIES.md: "DAgger on the student's own states".
#
# EXPERT=sweep: the env's sweep demonstrator (ALFWorldEnv(expert="sweep")) plays the demos and labels the
# policy's states, and the oracle names its commands (BASE: studies/sweep_expert_study.sh's base). THREADS: torch
# threads (default 2).
#
#   bash studies/dagger_base.sh BASE [OUT_DIR] [ROUNDS] [EXPERT]   # BASE: skill_literate_base.sh's stage3; default
#                                               # runs/dagger, 2 rounds, handcoded; ~30 min + 5 min eval each
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
BASE=${1:?usage: bash studies/dagger_base.sh BASE [OUT_DIR] [ROUNDS] [EXPERT]}
OUT=${2:-runs/dagger}
ROUNDS=${3:-2}
ENV_KW="{\"expert\": \"${4:-handcoded}\"}"
mkdir -p "$OUT"
COMMON=("${SKILL_LITERATE[@]}" --epochs 2 --lr 1e-3 --torch-threads "${THREADS:-2}" --tasks 100 --policy-tasks 300
        --hint-follow-prob 0.5 --env-kwargs "$ENV_KW")
prev=$BASE
for r in $(seq 1 "$ROUNDS"); do
  stage=$((r + 3))  # the base is stage 3
  [ -f "$OUT/stage$stage/config.json" ] || opid-sft "${COMMON[@]}" --model "$prev" --out "$OUT/stage$stage" \
    --seed $((stage - 1))
  [ -f "$OUT/headroom$stage/results.json" ] || opid-eval "${ORACLE_PLAY[@]}" \
    --panel alfworld/valid_unseen@v1 --model "$OUT/stage$stage" --env-kwargs "$ENV_KW" --max-new-tokens 48 \
    --torch-threads "${THREADS:-2}" --output "$OUT/headroom$stage"
  prev=$OUT/stage$stage
done
