#!/usr/bin/env bash
# Without the random hint-following samples (issue 13). The sweep bases of studies/sweep_expert_study.sh and
# studies/dagger_base.sh train on hint-following samples at 0.5: a step skill naming a RANDOM admissible command,
# the target that command. Their teacher, given the sweep's own command, then writes a take of another object
# class 62 % of the time (studies/take_errors.py): those samples teach "take what is named, or anything".
# Stage 5 fine-tunes 2 epochs on sweep demos with --hint-follow-prob 0; then the unseen panel as student and
# as oracle-skill teacher; then GRPO, OPID with teacher samples (T) and T with shuffled skills, 3 seeds
# (studies/learning.py, the budget of studies/sweep_expert_study.sh).
# docs/STUDIES.md: "Without the random hint-following samples".
# MAX_STEPS (default 15, as in studies/sweep_expert_study.sh) caps the training episodes; with MAX_STEPS=30 (the
# panel's cap) and ARMS=grpo_t the study trains GRPO and T only, into OUT/learning_ms30 and
# studies/results/learning_nohint_ms30.json.
#
#   bash studies/nohint_study.sh BASE [OUT_DIR] [SEEDS]
#   # BASE: round 1 of `THREADS=1 bash studies/dagger_base.sh runs/sweep_expert/base runs/sweep_dagger 1 sweep`
#   # (runs/sweep_dagger/stage4); default runs/nohint, 0,1,2; measured 7 + 5 + 57 min (MAX_STEPS=30: 50 min)
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
T=$T_ARM
BASE=${1:?usage: bash studies/nohint_study.sh BASE [OUT_DIR] [SEEDS]}
OUT=${2:-runs/nohint}
SEEDS=${3:-0,1,2}
PY=${PYTHON:-python}
MAX_STEPS=${MAX_STEPS:-15}
case ${ARMS:-all} in
  all) VARIANTS="grpo,$T,$T+shuffle_skills=true" ;;
  grpo_t) VARIANTS="grpo,$T" ;;
  *) echo "ARMS=${ARMS}: choose all (GRPO, T, T with shuffled skills) or grpo_t" >&2; exit 2 ;;
esac
SUFFIX=$([ "$MAX_STEPS" = 15 ] || echo "_ms$MAX_STEPS")
mkdir -p "$OUT"
[ -f "$OUT/stage5/config.json" ] || opid-sft "${SKILL_LITERATE[@]}" --model "$BASE" --out "$OUT/stage5" \
  --demonstrator sweep --tasks 330 --seed 13 --epochs 2 --lr 1e-3 --hint-follow-prob 0 --torch-threads 2
[ -f "$OUT/headroom5/results.json" ] || opid-eval "${ORACLE_PLAY[@]}" \
  --panel alfworld/valid_unseen@v1 --model "$OUT/stage5" --env-kwargs "$SWEEP" --max-new-tokens 48 \
  --max-prompt-len 1024 --torch-threads 2 --output "$OUT/headroom5"
# the base's panel plays do not depend on the training cap: reuse those of the default study where it ran
if [ -n "$SUFFIX" ]; then
  mkdir -p "$OUT/learning$SUFFIX/runs"
  for f in "$OUT"/learning/runs/base-s*.json; do
    if [ -f "$f" ] && [ ! -f "$OUT/learning$SUFFIX/runs/${f##*/}" ]; then cp "$f" "$OUT/learning$SUFFIX/runs/"; fi
  done
fi
A=(--base "$OUT/stage5" --env-config "$SWEEP" --variants "$VARIANTS" --seeds "$SEEDS"
   --iters 6 --max-steps "$MAX_STEPS" --minibatch-size 32 --torch-threads 1 --lr 3e-4 --opid-variant "$T"
   --shuffled-variant "$T+shuffle_skills=true" --out "$OUT/learning$SUFFIX"
   --headroom-panel alfworld/valid_unseen@v1 --headroom-results "$OUT/headroom5/results.json")
# wait $!: shard 0's status (a bare wait returns 0 after its crash; set -e then stops the study)
"$PY" -m studies.learning "${A[@]}" --shard 0/2 & "$PY" -m studies.learning "${A[@]}" --shard 1/2; wait $!
"$PY" -m studies.learning "${A[@]}" --results "studies/results/learning_nohint$SUFFIX.json"
