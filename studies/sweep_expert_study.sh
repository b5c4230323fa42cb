#!/usr/bin/env bash
# Skills that name a command the prompt determines (issue 13): a base cloned from scratch on ALFWorld's sweep
# demonstrator (analyzer-worded step skills naming the sweep's command on half the episodes, recovery states,
# hint-following samples), its skill headroom when the oracle names the sweep's command
# (`opid-eval --env-kwargs '{"expert": "sweep"}'`), and GRPO against OPID with teacher samples when the built-in
# hindsight analyzer's step skills name the sweep's command too (`studies/learning.py --env-config`), 3 seeds.
# docs/STUDIES.md: "Skills that name what the prompt determines".
#
#   bash studies/sweep_expert_study.sh [OUT_DIR] [SEEDS]  # default runs/sweep_expert, 0,1,2; measured 33 + 6 + 54 min
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
T=$T_ARM
OUT=${1:-runs/sweep_expert}
SEEDS=${2:-0,1,2}
PY=${PYTHON:-python}
mkdir -p "$OUT"
[ -f "$OUT/base/config.json" ] || opid-sft "${SKILL_LITERATE[@]}" --model tiny --out "$OUT/base" \
  --demonstrator sweep --tasks 330 --seed 11 --epochs 6 --lr 1e-3 --hint-follow-prob 0.5 --torch-threads 2
[ -f "$OUT/headroom/results.json" ] || opid-eval "${ORACLE_PLAY[@]}" \
  --panel alfworld/valid_unseen@v1 --model "$OUT/base" --env-kwargs "$SWEEP" --max-new-tokens 48 \
  --max-prompt-len 1024 --torch-threads 2 --output "$OUT/headroom"
A=(--base "$OUT/base" --env-config "$SWEEP" --variants "grpo,$T" --seeds "$SEEDS" --iters 6 --max-steps 15
   --minibatch-size 32 --torch-threads 1 --lr 3e-4 --opid-variant "$T" --out "$OUT/learning"
   --headroom-panel alfworld/valid_unseen@v1 --headroom-results "$OUT/headroom/results.json")
# wait $!: shard 0's status (a bare wait returns 0 after its crash; set -e then stops the study)
"$PY" -m studies.learning "${A[@]}" --shard 0/2 & "$PY" -m studies.learning "${A[@]}" --shard 1/2; wait $!
"$PY" -m studies.learning "${A[@]}" --results studies/results/learning_sweep_expert.json
