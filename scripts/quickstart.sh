#!/usr/bin/env bash
# The main job on the embedded defaults: tiny model built offline, offline ALFWorld games,
# built-in hindsight analyzer. SFT warm start -> OPID training -> export -> evaluation on the
# fixed unseen panel. About 25-55 minutes on a 2-core CPU, most of it the warm start (21-40 min by machine;
# SFT_EPOCHS=2 halves it at some cost in success). Outputs under ${OUT:-outputs/quickstart}.
set -euo pipefail
OUT=${OUT:-outputs/quickstart}
ITERS=${ITERS:-3}
mkdir -p "$OUT"
# The warm-start recipe of bench/learning.py (all 330 train games, 4 epochs): on the unseen panel
# it takes the tiny model from 0 % to a non-zero success rate that RL can build on.
opid-sft --env alfworld --model tiny --out "$OUT/sft" --overwrite --tasks "${SFT_TASKS:-330}" \
  --epochs "${SFT_EPOCHS:-4}" --batch-size 4 --lr 3e-3 --history-length 2 --max-prompt-len 1024 --max-steps 30
opid-train --env alfworld --cpu-example --model "$OUT/sft" --stop-iters "$ITERS" --no-tune \
  --output "$OUT/train" --checkpoint-at-end
opid-export "$OUT/train/checkpoint_final" "$OUT/policy"
EVAL_N=()
if [[ -n "${EVAL_EPISODES:-}" ]]; then EVAL_N=(--episodes "$EVAL_EPISODES"); fi
opid-eval --env alfworld --panel alfworld/valid_unseen@v1 --model "$OUT/policy" ${EVAL_N[@]+"${EVAL_N[@]}"} \
  --history-length 2 --max-steps 30 --max-new-tokens 48 --output "$OUT/eval"
opid-report "$OUT/train"
echo "TensorBoard: tensorboard --logdir $OUT/train ; report: $OUT/train/report/index.html"
