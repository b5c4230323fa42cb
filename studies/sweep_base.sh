#!/usr/bin/env bash
# A student that can copy its demonstrator (issue 13, section 2): fine-tune a skill-literate base on games played
# by ALFWorld's sweep demonstrator (envs/alfworld/sweep.py: acts only on what the prompt shows, wins 91 % of the
# unseen panel within 30 steps, `python -m studies.sweep_games`) instead of the hand-coded expert, whose memory
# of visited places the prompt does not hold; hint-following samples at 0.5 keep the skill literacy. Stages
# 6 and 7 continue one another on all 330 train games (seeds 5, 6; 3, 4 epochs; a third stage, if asked for,
# runs 4 more epochs with seed 7: not measured); after each the unseen
# panel is played as student and as oracle-skill teacher (the oracle still names the hand-coded expert's next
# command) and `studies/decision_fit.py` measures how often greedy decoding reproduces the sweep's command.
# docs/STUDIES.md: "A demonstrator the student can copy".
#
#   bash studies/sweep_base.sh BASE [OUT_DIR] [STAGES]  # BASE: studies/dagger_base.sh's last stage (runs/dagger/stage5);
#                                                     # default runs/sweep, 2 stages; ~15-25 min + 6 min each
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
BASE=${1:?usage: bash studies/sweep_base.sh BASE [OUT_DIR] [STAGES]}
OUT=${2:-runs/sweep}
STAGES=${3:-2}
PY=${PYTHON:-python}
EPOCHS=(3 4 4)
mkdir -p "$OUT"
prev=$BASE
for i in $(seq 0 $((STAGES - 1))); do
  stage=$((i + 6))  # after the DAgger rounds' stages 4 and 5
  [ -f "$OUT/stage$stage/config.json" ] || opid-sft "${SKILL_LITERATE[@]}" --model "$prev" \
    --out "$OUT/stage$stage" --demonstrator sweep --tasks 330 --seed $((stage - 1)) --epochs "${EPOCHS[$i]:-4}" \
    --lr 1e-3 --hint-follow-prob 0.5 --torch-threads 2
  [ -f "$OUT/headroom$stage/results.json" ] || opid-eval "${ORACLE_PLAY[@]}" \
    --panel alfworld/valid_unseen@v1 --model "$OUT/stage$stage" --max-new-tokens 48 --torch-threads 2 \
    --output "$OUT/headroom$stage"
  [ -f "$OUT/fit$stage.json" ] || "$PY" -m studies.decision_fit --model "$OUT/stage$stage" --demonstrator sweep \
    --splits train,valid_unseen --tasks 25 --seed 0 --json "$OUT/fit$stage.json"
  prev=$OUT/stage$stage
done
