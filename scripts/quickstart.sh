#!/usr/bin/env bash
# The main job on the embedded defaults: tiny model built offline, offline ALFWorld games,
# built-in hindsight analyzer. SFT warm start -> OPID training -> export -> evaluation.
# About 15-25 minutes on a 2-core CPU. Outputs under ${OUT:-outputs/quickstart}.
set -euo pipefail
OUT=${OUT:-outputs/quickstart}
ITERS=${ITERS:-3}
mkdir -p "$OUT"
opid-sft --env alfworld --model tiny --out "$OUT/sft" --overwrite --tasks "${SFT_TASKS:-60}" --epochs "${SFT_EPOCHS:-3}" \
  --history-length 2 --max-steps 30
opid-train --env alfworld --cpu-example --model "$OUT/sft" --stop-iters "$ITERS" --no-tune \
  --output "$OUT/train" --checkpoint-at-end
opid-export "$OUT/train/checkpoint_final" "$OUT/policy"
opid-eval --env alfworld --panel alfworld/valid_unseen@v1 --model "$OUT/policy" --episodes "${EVAL_EPISODES:-24}" \
  --history-length 2 --max-steps 8 --max-new-tokens 24 --output "$OUT/eval"
echo "TensorBoard: tensorboard --logdir $OUT/train"
