#!/usr/bin/env bash
# Issue 13's protocol from one skill-literate base: the package's Tune sweep over both skill weights (selected
# on the held-out valid_seen panel, or on training success with SELECT=, never on the unseen panel), then GRPO,
# OPID at the reference weights, OPID at the selected weights, OPID with shuffled skills and OPID without step
# skills, same budget, scored on all 126 valid_unseen games with no analyzer and no skills.
#
#   bash bench/opid_vs_grpo_study.sh BASE [OUT_DIR]     # BASE: e.g. runs/skill_literate/stage3
#   SEEDS=0,1,2 ARMS=all bash bench/opid_vs_grpo_study.sh BASE     # the issue's 3 seeds
#   SELECT= bash bench/opid_vs_grpo_study.sh BASE                  # select on training success instead
#   ON_PLAN=3 bash bench/opid_vs_grpo_study.sh BASE                 # hindsight analyzer: 3 of the 5 step skills
#                                                                  # may name a right move (on_plan_step_skills)
#   TEACHER_SAMPLES=1 bash bench/opid_vs_grpo_study.sh BASE         # every OPID arm (and the sweep) adds teacher
#                                                                  # samples at w_T = 1 (teacher_sample_adv_weight)
#
# Points that tie at the best score (a policy that never wins ties at 0 training success; on valid_seen
# several points can tie too) do not select: the study then takes the largest tied weights and says so (with
# no outcome signal the update is the skill term against the entropy and KL terms, and the weight sets its size).
set -euo pipefail
BASE=${1:?usage: bench/opid_vs_grpo_study.sh BASE [OUT_DIR]}
OUT=${2:-runs/study}
PY=${PYTHON:-python}
SEEDS=${SEEDS:-0}
GRID=${GRID:-0.01,0.1}
SWEEP_ITERS=${SWEEP_ITERS:-2}
ITERS=${ITERS:-6}
SELECT=${SELECT-alfworld/valid_seen@v1}
MB=${MINIBATCH:-32}
ON_PLAN=${ON_PLAN:-0}
TEACHER=${TEACHER_SAMPLES:-0}
SIZES=(--max-steps 15 --minibatch-size "$MB")
mkdir -p "$OUT"
[ -f "$OUT/sweep/sweep.json" ] || "$PY" tuned_examples/alfworld_opid_weight_sweep.py --model "$BASE" \
  --weight-grid "$GRID" "${SIZES[@]}" --stop-iters "$SWEEP_ITERS" --num-cpus 2 --verbose 1 --output "$OUT/sweep" \
  ${SELECT:+--select-panel "$SELECT" --select-max-steps 30} --analyzer-option "on_plan_step_skills=$ON_PLAN" \
  --teacher-sample-adv-weight "$TEACHER"
W=$("$PY" - "$OUT/sweep/sweep.json" <<'EOF'
import json, sys
sel = json.load(open(sys.argv[1]))
pick = max(sel["tied"], key=lambda p: (p["episode_skill_adv_weight"], p["step_skill_adv_weight"])) if sel["tied"] \
    else {"episode_skill_adv_weight": 0.001, "step_skill_adv_weight": 0.001}
print(f"w_ep={pick['episode_skill_adv_weight']}+w_step={pick['step_skill_adv_weight']}")
print(("selected" if sel["informative"] else f"tie of {len(sel['tied'])} points, largest taken") + ": " + str(pick),
      file=sys.stderr)
EOF
)
[ "$ON_PLAN" = 0 ] || W="$W+analyzer.on_plan_step_skills=$ON_PLAN"
[ "$TEACHER" = 0 ] || W="$W+teacher_sample_adv_weight=$TEACHER"
BEST="opid:$W"
case "${ARMS:-core}" in
  all) VARIANTS="grpo,opid,$BEST,opid_shuffled:$W,no_step_skill:${W%%+*}" ;;  # no step skills: w_ep only
  core) VARIANTS="grpo,$BEST,opid_shuffled:$W" ;;
  *) VARIANTS="$ARMS" ;;
esac
"$PY" bench/learning.py --base "$BASE" --variants "$VARIANTS" --seeds "$SEEDS" --iters "$ITERS" \
  --max-steps 15 --minibatch-size "$MB" --torch-threads 2 --opid-variant "$BEST" --shuffled-variant "opid_shuffled:$W" \
  --out "$OUT/learning" ${RESULTS:+--results "$RESULTS"}
