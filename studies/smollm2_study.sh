#!/usr/bin/env bash
# Issue 13's learning study on SmolLM2-135M, from the skill-literate warm start of studies/smollm2_headroom.sh:
# GRPO against T (the README ledger's OPID arm, studies/recipe.sh; ARMS=all adds T with shuffled skills) at the tiny
# model's study budget (6 iterations x 4 tasks x 4 copies, 15-step episodes, an optimizer step per 32
# step-samples), each scored on all 126 valid_unseen games with no analyzer and no skills. One process on both
# threads: with micro-batches of 4, memory in use peaked at 10.7 GB while GRPO trained and 15.3 GB while T did (sampled
# every 20 s), so studies/learning.py's two shards would not fit in 24 GB. Each job (the base's play per seed, each
# arm x seed) is cached under OUT/runs when it ends, and a job's training is checkpointed every iteration in its run
# folder, so a study cut short resumes at its next job, at the next iteration of the job it was training, or at the
# next chunk of 16 games of the play it was making (OUT/settings.json refuses a resume with other settings, another LR
# or other warm-start weights included). The default OUT lies in the repo: commit its runs/*.json as they finish (git
# ignores the run folders, policy weights, checkpoints and played chunks among them), and a fresh machine resumes the
# study from the SFT rebuilt by studies/smollm2_headroom.sh, which goes on only where the rebuilt weights are the
# recorded ones. docs/STUDIES.md: "SmolLM2-135M with a skill-literate warm start" (its cost on machine D).
#
#   LR=1e-5 bash studies/smollm2_study.sh SFT [OUT_DIR]    # SFT: studies/smollm2_headroom.sh's OUT/sft_tTASKS_eEPOCHS
#                              # OUT_DIR: default studies/results/smollm2_study
#   SEEDS=0 ...                # default 0,1,2; a sitting writes OUT's learning.json/png over its own SEEDS and
#                              # ARMS only: after sittings one seed at a time, REPORT=1 SEEDS=0,1,2 rewrites them
#   ARMS=all ...               # default grpo_t: GRPO and T; all: also T with shuffled skills; t: T alone;
#                              # grpo: GRPO alone; shuffled: T with shuffled skills alone (one arm per sitting);
#                              # base: the base's plays alone (a warm start another CPU rebuilt, set against a
#                              # study's base game by game; give its own OUT_DIR)
#   ANCHOR=1 ...               # also T with the teacher anchor at c_A = 1 (teacher_anchor_coeff: KL to the base on
#                              # the skill prompt, which keeps the skill teacher the base's), after the arms above
#   UNQUOTED=1 ...             # also T whose step skills do not quote the command they correct
#                              # (analyzer.quote_sampled=false; studies/skill_copy_probe.py says why), after the above
#   NO_TEACHER_SAMPLES=1 ...   # also T without its teacher-samples term (teacher_sample_adv_weight=0): the float32
#                              # T arms' training ill-formed takes of the task's object rose where GRPO's did not,
#                              # and that term is a candidate cause; GRPO seed 1 on the AMX base raised them too
#                              # (studies/play_phases.py; docs/STUDIES.md), which weakens that motive
#   NO_STEP=0.3 ...            # also OPID without step skills (the issue's ablation): the episode skill alone at
#                              # w_ep = NO_STEP, centred (no_step_skill:w_ep=NO_STEP+normalize_teacher_adv=true; 0.3
#                              # is T's step weight, as studies/opid_vs_grpo_study.sh sizes that arm); no teacher
#                              # samples, which T draws on rows routed to a step skill only; after the arms above
#   EVERY_STEP=1 ...           # also OPID with a step skill at every step, unquoted, no teacher samples
#                              # (studies/recipe.sh EVERY_STEP_ARM: the oracle play's teacher, distilled by the
#                              # paper's step term alone), after the arms above
#   ITERS=6 DTYPE=bfloat16 THREADS=2 ...   # DTYPE=bfloat16 is refused on a CPU without AVX512-BF16/AMX
#                              # unless SLOW_BF16=1 (or REPORT=1, which trains nothing)
#   HEADROOM=PLAY/results.json ...   # the base's oracle play, read as the study's teacher table instead of
#                              # playing it again (about 67 min here); default SFT-alfworld_valid_unseen_v1/results.json
#                              # (where studies/smollm2_headroom.sh writes it) when that exists; its RESULTS= record
#                              # (studies/results/headroom_smollm2_t120_e1_unseen.json for sft_t120_e1) is read too
#   RESULTS=studies/results/learning_smollm2.json ...   # also write the per-seed numbers, command and summary there
#   REPORT=1 ...               # train and play nothing: report the jobs of ARMS x SEEDS already cached (after a
#                              # sitting that ran one arm, e.g. SEEDS=0,1,2 ARMS=all REPORT=1)
# Micro-batches of 4 rows, not the tiny preset's 16 (the same gradient: a sum over rows / tokens): at 16 the learner
# outgrew this machine's 24 GB in GRPO's third iteration and was killed.
# LR has no default: no RL learning rate has been measured for SmolLM2 here (the tiny model's studies use 3e-4,
# the package's default for real models is 1e-6).
set -euo pipefail
. "$(dirname "$0")/recipe.sh"
BASE=${1:?usage: LR=... bash studies/smollm2_study.sh SFT [OUT_DIR]}
OUT=${2:-studies/results/smollm2_study}
PY=${PYTHON:-python}
DTYPE=${DTYPE:-bfloat16}
[ -n "${LR:-}" ] || { echo "LR=: set the RL learning rate (none has been measured for SmolLM2 here)" >&2; exit 2; }
case $DTYPE in float32|bfloat16) ;; *) echo "DTYPE=$DTYPE: choose float32 or bfloat16" >&2; exit 2 ;; esac
[ -n "${REPORT:-}" ] || refuse_emulated_bf16 "$DTYPE" "run the study on a CPU that has them (its jobs so far were \
made on one) or start a new OUT_DIR with DTYPE=float32"
case ${ARMS:-grpo_t} in
  all) VARIANTS="grpo,$T_ARM,$T_ARM+shuffle_skills=true" ;;
  grpo_t) VARIANTS="grpo,$T_ARM" ;;
  t) VARIANTS="$T_ARM" ;;
  grpo) VARIANTS="grpo" ;;
  shuffled) VARIANTS="$T_ARM+shuffle_skills=true" ;;
  base) VARIANTS="" ;;
  *) echo "ARMS=${ARMS}: choose grpo_t (GRPO and T), all (also T with shuffled skills), t, grpo, shuffled or base" >&2
     exit 2 ;;
esac
[ -z "${ANCHOR:-}" ] || VARIANTS="$VARIANTS,$T_ARM+teacher_anchor_coeff=$ANCHOR"
[ -z "${UNQUOTED:-}" ] || VARIANTS="$VARIANTS,$T_ARM+analyzer.quote_sampled=false"
[ -z "${NO_TEACHER_SAMPLES:-}" ] || VARIANTS="$VARIANTS,$T_ARM+teacher_sample_adv_weight=0"
[ -z "${NO_STEP:-}" ] || VARIANTS="$VARIANTS,no_step_skill:w_ep=$NO_STEP+normalize_teacher_adv=true"
[ -z "${EVERY_STEP:-}" ] || VARIANTS="$VARIANTS,$EVERY_STEP_ARM"
VARIANTS=${VARIANTS#,}  # ARMS=base with an extra arm
PANEL=alfworld/valid_unseen@v1
PLAYED=$(play_dir "$BASE" "$PANEL")/results.json
HEADROOM=${HEADROOM:-$([ -f "$PLAYED" ] && echo "$PLAYED" || true)}
"$PY" -m studies.learning --base "$BASE" --env-config "$SWEEP" --variants "$VARIANTS" \
  --seeds "${SEEDS:-0,1,2}" --iters "${ITERS:-6}" --max-steps 15 --minibatch-size 32 --micro-batch-size 4 \
  --lr "$LR" --dtype "$DTYPE" \
  --torch-threads "${THREADS:-2}" --max-new-tokens 32 --max-prompt-len 2048 --opid-variant "$T_ARM" \
  --shuffled-variant "$T_ARM+shuffle_skills=true" --out "$OUT" --headroom-panel "$PANEL" \
  ${HEADROOM:+--headroom-results "$HEADROOM"} ${RESULTS:+--results "$RESULTS"} ${REPORT:+--cached-only}
