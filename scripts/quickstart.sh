#!/usr/bin/env bash
# The main job on the embedded defaults: tiny model built offline, offline ALFWorld games, built-in
# hindsight analyzer. SFT warm start -> OPID training -> export -> evaluation -> report.
#
#   scripts/quickstart.sh          quick mode (default): a first end-to-end result in minutes. Short
#                                  warm start (20 games, 1 epoch), 1 OPID iteration on 2 tasks x 4, evaluation on the
#                                  12-game alfworld/smoke@v1 panel. Expect ~0 % success: it shows the
#                                  pipeline works and what each step writes, not what OPID learns.
#   scripts/quickstart.sh --full   the recipe behind the README's numbers: warm start on all 330 train
#                                  games x 4 epochs, 3 OPID iterations, the 126-game valid_unseen panel.
#                                  About 25-55 min on a 2-core CPU, most of it the warm start.
#
# Both modes end with rung 0 of the learning gate (GRPO on Signpost until 90 % success, 1.5-2 min; RUNG0=0 skips
# it), whose success curve is the run's plot of learning.
# Every size can be overridden by env vars (SFT_TASKS, SFT_EPOCHS, ITERS, TASKS_PER_ITER, PANEL, EVAL_EPISODES,
# TORCH_THREADS: --torch-threads of every step; the commands' default on a CPU is one thread per process, which on
# a busy 2-core box was many times faster than torch's own two). Every step prints a progress line at least every
# 10-15 s and ends by naming what it wrote; the warm start saves a checkpoint per epoch: re-running the same
# command after a stop resumes it. Outputs under ${OUT:-outputs/quickstart} (quick) / outputs/quickstart-full.
set -euo pipefail
MODE=quick
for arg in "$@"; do
  case "$arg" in
    --full) MODE=full ;;
    --quick) MODE=quick ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "quickstart.sh: unknown argument $arg (use --full for the full recipe, or nothing)" >&2; exit 2 ;;
  esac
done
if [[ $MODE == full ]]; then
  OUT=${OUT:-outputs/quickstart-full}
  SFT_TASKS=${SFT_TASKS:-330}; SFT_EPOCHS=${SFT_EPOCHS:-4}; ITERS=${ITERS:-3}; PANEL=${PANEL:-alfworld/valid_unseen@v1}
  TASKS_PER_ITER=${TASKS_PER_ITER:-4}
else
  OUT=${OUT:-outputs/quickstart}
  SFT_TASKS=${SFT_TASKS:-20}; SFT_EPOCHS=${SFT_EPOCHS:-1}; ITERS=${ITERS:-1}; PANEL=${PANEL:-alfworld/smoke@v1}
  TASKS_PER_ITER=${TASKS_PER_ITER:-2}
fi
mkdir -p "$OUT"
TT=()
if [[ -n "${TORCH_THREADS:-}" ]]; then TT=(--torch-threads "$TORCH_THREADS"); fi
T0=$SECONDS
phase() { echo "[quickstart:$MODE] $1 (t=$((SECONDS - T0))s)"; }

# The warm-start recipe of studies/learning.py (batch 4, lr 3e-3, history 2, prompts <= 1024 tokens):
# on the unseen panel the full version takes the tiny model from 0 % to a non-zero success rate.
phase "warm start: $SFT_TASKS games x $SFT_EPOCHS epoch(s)"
opid-sft --env alfworld --model tiny --out "$OUT/sft" --overwrite --tasks "$SFT_TASKS" \
  --epochs "$SFT_EPOCHS" --batch-size 4 --lr 3e-3 --history-length 2 --max-prompt-len 1024 --max-steps 30 \
  ${TT[@]+"${TT[@]}"}
phase "OPID training: $ITERS iteration(s)"
opid-train --env alfworld --cpu-example --model "$OUT/sft" --stop-iters "$ITERS" \
  --tasks-per-iter "$TASKS_PER_ITER" --group-size 4 --no-tune \
  --output "$OUT/train" --checkpoint-at-end ${TT[@]+"${TT[@]}"}
phase "export"
opid-export "$OUT/train/checkpoint_final" "$OUT/policy"
EVAL_N=()
if [[ -n "${EVAL_EPISODES:-}" ]]; then EVAL_N=(--episodes "$EVAL_EPISODES"); fi
phase "evaluation on $PANEL"
opid-eval --env alfworld --panel "$PANEL" --model "$OUT/policy" ${EVAL_N[@]+"${EVAL_N[@]}"} \
  --history-length 2 --max-steps 30 --max-new-tokens 48 --output "$OUT/eval" ${TT[@]+"${TT[@]}"}
phase "report"
opid-report "$OUT/train"
# The loop learns: GRPO on Signpost (rung 0 of the learning gate, docs/LEARNING_GATE.md), from chance to 90 %
# success in about 16 iterations (1.5-2 min); the curve goes to a PNG. RUNG0=0 skips it.
RUNG0=${RUNG0:-1}
if [[ $RUNG0 != 0 ]]; then
  phase "learning check: GRPO on Signpost until 90 % success"
  "${PYTHON:-python}" "$(dirname "$0")/../tuned_examples/signpost_rung0.py" --preset grpo --seeds 0 \
    --json "$OUT/rung0/rung0.json" --plot "$OUT/rung0/success.png"
fi
phase "done"
echo "TensorBoard: tensorboard --logdir $OUT/train ; report: $OUT/train/report/index.html"
if [[ $RUNG0 != 0 ]]; then echo "Learning check: $OUT/rung0/success.png (curves in $OUT/rung0/rung0.json)"; fi
if [[ $MODE == quick ]]; then echo "Next: scripts/quickstart.sh --full (the full recipe, 25-55 min on 2 cores)"; fi
