#!/usr/bin/env bash
# Issue 13's whole learning study from nothing, in one command, timed (section 3: <= 2 h on 2 cores): the
# no-hint base's recipe, then the protocol of studies/opid_vs_grpo_study.sh on it. docs/STUDIES.md: "bf16 on this
# CPU, and the whole study from scratch in one command".
#   1. clone ALFWorld's sweep demonstrator into the tiny model (studies/sweep_expert_study.sh's base);
#   2. one DAgger round on the sweep's labels (round 1 of `bash studies/dagger_base.sh BASE OUT 1 sweep`);
#   3. stage 5 without hint-following samples (studies/nohint_study.sh's stage 5) and its oracle-skill play;
#   4. the Tune sweep over both skill weights and the five arms x 3 seeds (studies/opid_vs_grpo_study.sh, the
#      settings of docs/STUDIES.md's "The issue's whole protocol on the no-hint base").
# Each stage is skipped where its output exists, so a stopped study resumes; OUT/timings.tsv holds each stage's
# wall seconds (of this call) and the total.
#
#   bash studies/from_scratch_study.sh [OUT_DIR]      # default runs/scratch
#   DTYPE=bfloat16 bash studies/from_scratch_study.sh runs/scratch_bf16   # bf16 compute (bench/dtype_speed.py)
#   SEEDS=0 RESULTS=studies/results/learning_scratch.json ...             # seeds of the arms; where the report goes
#   SWEEP_SAMPLES=2 ...      # seeds per sweep point, ranked on their mean (read by studies/opid_vs_grpo_study.sh)
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
OUT=${1:-runs/scratch}
DTYPE=${DTYPE:-float32}
SEEDS=${SEEDS:-0,1,2}
case $DTYPE in float32|bfloat16) ;; *) echo "DTYPE=$DTYPE: choose float32 or bfloat16" >&2; exit 2 ;; esac
mkdir -p "$OUT"
TIMES=$OUT/timings.tsv
. "$(dirname "$0")/timings.sh"
# the recipe's shared settings: sweep demos (analyzer-worded step skills on half the episodes, recovery states)
S=("${SKILL_LITERATE[@]}" --lr 1e-3 --torch-threads 2 --dtype "$DTYPE")
[ -f "$OUT/base/config.json" ] || timed base opid-sft "${S[@]}" --model tiny --out "$OUT/base" \
  --demonstrator sweep --tasks 330 --seed 11 --epochs 6 --hint-follow-prob 0.5
[ -f "$OUT/stage4/config.json" ] || timed dagger opid-sft "${S[@]}" --model "$OUT/base" --out "$OUT/stage4" \
  --env-kwargs "$SWEEP" --tasks 100 --policy-tasks 300 --seed 3 --epochs 2 --hint-follow-prob 0.5
[ -f "$OUT/stage5/config.json" ] || timed stage5 opid-sft "${S[@]}" --model "$OUT/stage4" --out "$OUT/stage5" \
  --demonstrator sweep --tasks 330 --seed 13 --epochs 2 --hint-follow-prob 0
[ -f "$OUT/headroom5/results.json" ] || timed headroom opid-eval "${ORACLE_PLAY[@]}" \
  --panel alfworld/valid_unseen@v1 --model "$OUT/stage5" --env-kwargs "$SWEEP" --max-new-tokens 48 \
  --max-prompt-len 1024 --torch-threads 2 --dtype "$DTYPE" --output "$OUT/headroom5"
timed protocol env SEEDS="$SEEDS" ARMS=all GRID=0.03,0.3 LR=3e-4 ON_PLAN=3 NORMALIZE=1 TEACHER_SAMPLES=1 \
  ENV_KWARGS="$SWEEP" SHARDS=2 HEADROOM="$OUT/headroom5/results.json" DTYPE="$DTYPE" \
  bash studies/opid_vs_grpo_study.sh "$OUT/stage5" "$OUT"
awk -F'\t' 'NR > 1 && $1 != "total" {s += $2} END {printf "total\t%d\n", s}' "$TIMES" | tee -a "$TIMES"
