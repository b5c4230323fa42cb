#!/usr/bin/env bash
# Issue 13's protocol from one skill-literate base: the package's Tune sweep over both skill weights (selected
# on the held-out valid_seen panel, or on training success with SELECT=, never on the unseen panel), then GRPO,
# OPID at the reference weights, OPID at the selected weights, OPID with shuffled skills and OPID without step
# skills, same budget, scored on all 126 valid_unseen games with no analyzer and no skills.
#
#   bash studies/opid_vs_grpo_study.sh BASE [OUT_DIR]     # BASE: e.g. runs/skill_literate/stage3
#   SEEDS=0,1,2 ARMS=all bash studies/opid_vs_grpo_study.sh BASE     # the issue's 3 seeds
#   SELECT= bash studies/opid_vs_grpo_study.sh BASE                  # select on training success instead
#   ON_PLAN=3 bash studies/opid_vs_grpo_study.sh BASE                 # hindsight analyzer: 3 of the 5 step skills
#                                                                  # may name a right move (on_plan_step_skills)
#   TEACHER_SAMPLES=1 bash studies/opid_vs_grpo_study.sh BASE         # every OPID arm (and the sweep) adds teacher
#                                                                  # samples at w_T = 1 (teacher_sample_adv_weight)
#   TEACHER_SFT=1 ...          # with TEACHER_SAMPLES, also those samples' likelihood term at c_T = 1, outside
#                              # the PPO clip (teacher_sample_sft_coeff), in the sweep and every OPID arm
#   NORMALIZE=1 ...            # the sweep and the selected arms centre the skill terms (normalize_teacher_adv)
#   ENV_KWARGS='{"expert": "sweep"}' ...   # env settings of the sweep, the arms and the panel plays
#   LR=3e-4 SHARDS=2 HEADROOM=OUT/results.json ...   # learning rate of sweep and arms; the arms in two
#       # one-thread processes side by side; the base's opid-eval --skills oracle play as the headroom table
#   DTYPE=bfloat16 ...         # compute dtype of the sweep, the arms and their panel plays (default float32)
#   SWEEP_SAMPLES=2 ...        # each sweep point trained under seeds 0 and 1 and ranked on their mean (a
#                              # single draw per point can rank the points by luck; default 1)
#
# ARMS=all trains GRPO, OPID at the reference weights (the plain `opid` preset, 0.001 each), OPID at the selected
# weights (BEST), BEST with shuffled skills and BEST without step skills (the episode skill at BEST's w_ep, or at
# its w_step where the sweep selected w_ep = 0, so the arm keeps a skill term of the selected size).
# docs/STUDIES.md: "The issue's protocol, run once" and "The issue's whole protocol on the no-hint base".
#
# Points that tie at the best score (a policy that never wins ties at 0 training success; on valid_seen
# several points can tie too) do not select: the study then takes the largest tied weights and says so (with
# no outcome signal the update is the skill term against the entropy and KL terms, and the weight sets its size).
set -euo pipefail
BASE=${1:?usage: studies/opid_vs_grpo_study.sh BASE [OUT_DIR]}
OUT=${2:-runs/study}
PY=${PYTHON:-python}
SEEDS=${SEEDS:-0}
GRID=${GRID:-0.01,0.1}
SWEEP_ITERS=${SWEEP_ITERS:-2}
SWEEP_SAMPLES=${SWEEP_SAMPLES:-1}
ITERS=${ITERS:-6}
SELECT=${SELECT-alfworld/valid_seen@v1}
MB=${MINIBATCH:-32}
ON_PLAN=${ON_PLAN:-0}
TEACHER=${TEACHER_SAMPLES:-0}
TSFT=${TEACHER_SFT:-0}
NORMALIZE=${NORMALIZE:-0}
ENV_KWARGS=${ENV_KWARGS:-'{}'}
SHARDS=${SHARDS:-1}
DTYPE=${DTYPE:-float32}
SIZES=(--max-steps 15 --minibatch-size "$MB" ${LR:+--lr "$LR"} --dtype "$DTYPE")
[ "$NORMALIZE" = 0 ] || SIZES+=(--normalize-teacher-adv)
case $SHARDS in 1|2) ;; *) echo "SHARDS=$SHARDS: choose 1 or 2" >&2; exit 2 ;; esac
mkdir -p "$OUT"
[ -f "$OUT/sweep/sweep.json" ] || "$PY" tuned_examples/alfworld_opid_weight_sweep.py --model "$BASE" \
  --weight-grid "$GRID" "${SIZES[@]}" --stop-iters "$SWEEP_ITERS" --num-samples "$SWEEP_SAMPLES" --num-cpus 2 \
  --verbose 1 --output "$OUT/sweep" \
  ${SELECT:+--select-panel "$SELECT" --select-max-steps 30} --analyzer-option "on_plan_step_skills=$ON_PLAN" \
  --teacher-sample-adv-weight "$TEACHER" --teacher-sample-sft-coeff "$TSFT" --env-kwargs "$ENV_KWARGS"
read -r W WNS < <("$PY" - "$OUT/sweep/sweep.json" <<'EOF'
import json, sys
sel = json.load(open(sys.argv[1]))
pick = max(sel["tied"], key=lambda p: (p["episode_skill_adv_weight"], p["step_skill_adv_weight"])) if sel["tied"] \
    else {"episode_skill_adv_weight": 0.001, "step_skill_adv_weight": 0.001}
w_ep, w_step = pick["episode_skill_adv_weight"], pick["step_skill_adv_weight"]
print(f"w_ep={w_ep:g}+w_step={w_step:g} w_ep={w_ep or w_step:g}")  # BEST's weights; the no-step-skill arm's
print(("selected" if sel["informative"] else f"tie of {len(sel['tied'])} points, largest taken") + ": " + str(pick),
      file=sys.stderr)
EOF
)
[ -n "${WNS:-}" ] || { echo "no selection read from $OUT/sweep/sweep.json" >&2; exit 1; }
[ "$ON_PLAN" = 0 ] || W="$W+analyzer.on_plan_step_skills=$ON_PLAN"
[ "$NORMALIZE" = 0 ] || { W="$W+normalize_teacher_adv=true"; WNS="$WNS+normalize_teacher_adv=true"; }
[ "$TEACHER" = 0 ] || W="$W+teacher_sample_adv_weight=$TEACHER"
[ "$TSFT" = 0 ] || W="$W+teacher_sample_sft_coeff=$TSFT"
BEST="opid:$W"
SHUFFLED="$BEST+shuffle_skills=true"
case "${ARMS:-core}" in
  all) VARIANTS="grpo,opid,$BEST,$SHUFFLED,no_step_skill:$WNS" ;;
  core) VARIANTS="grpo,$BEST,$SHUFFLED" ;;
  *) VARIANTS="$ARMS" ;;
esac
A=(--base "$BASE" --variants "$VARIANTS" --seeds "$SEEDS" --iters "$ITERS" --max-steps 15 --minibatch-size "$MB"
   ${LR:+--lr "$LR"} --dtype "$DTYPE" --env-config "$ENV_KWARGS" --opid-variant "$BEST" --shuffled-variant "$SHUFFLED"
   --out "$OUT/learning" ${HEADROOM:+--headroom-panel alfworld/valid_unseen@v1 --headroom-results "$HEADROOM"})
if [ "$SHARDS" = 2 ]; then
  "$PY" -m studies.learning "${A[@]}" --torch-threads 1 --shard 0/2 &
  "$PY" -m studies.learning "${A[@]}" --torch-threads 1 --shard 1/2
  wait $!  # shard 0 (a bare wait would return 0 after its crash)
fi
# one process on both cores (SHARDS=1); after two shards this call only reads their runs and writes the report
"$PY" -m studies.learning "${A[@]}" --torch-threads $((3 - SHARDS)) ${RESULTS:+--results "$RESULTS"}
