# Sourced by the drivers that build or play a skill-literate base (issue 13), so that the recipe is written once.
# SKILL_LITERATE: opid-sft's settings shared by every skill-literate stage: analyzer-worded step skills (with
#   "instead of ...") in half of the episodes, recovery states after the demonstrator's deviations at 0.15,
#   history 2, action-only answers. Each stage adds its model, demonstrator, tasks, seed, epochs, lr,
#   hint-following rate and threads.
# ORACLE_PLAY: opid-eval's settings of a headroom play, where the student plays without skills and the teacher
#   with the step skill naming the env's expert command at every step. Each driver adds its panel, model,
#   expert, answer and prompt lengths, threads and output.
SKILL_LITERATE=(--env alfworld --batch-size 8 --history-length 2 --max-steps 30 --skill-fraction 0.5
                --step-skill-wording analyzer --deviation-prob 0.15 --response-style action)
ORACLE_PLAY=(--env alfworld --skills oracle --history-length 2 --max-steps 30 --temperature 0.4)
# SWEEP: the env setting that makes the sweep the env's expert (the command the oracle and the hindsight
#   analyzer name, and agreement's reference).
SWEEP='{"expert": "sweep"}'
# play_dir SFT PANEL: where studies/smollm2_headroom.sh writes the oracle play of SFT on PANEL, and where
#   studies/smollm2_study.sh looks for it.
play_dir() { echo "$1-${2//[\/@]/_}"; }
# T: the OPID arm most studies train (the README's ledger), step skills only at w_step 0.3 with 3 of the 5 step
# skills allowed on right moves, the skill terms centred, and teacher samples at w_T = 1.
T_ARM='opid:w_ep=0+w_step=0.3+analyzer.on_plan_step_skills=3+normalize_teacher_adv=true+teacher_sample_adv_weight=1'
# EVERY_STEP_ARM: the paper's step term alone (no teacher samples), with a step skill written for every step (up
#   to 30, all of them allowed on right moves) in the unquoted wording ("At this point, X." on and off the plan), so
#   the teacher distilled in training is the one whose headroom `opid-eval --skills oracle` measures (a skill at
#   every step), and no skill quotes a sampled command for the teacher to copy. T's 5 slots (3 on right moves)
#   left most steps without a skill.
EVERY_STEP_ARM='opid:w_ep=0+w_step=0.3+max_step_skills_per_traj=30+analyzer.on_plan_step_skills=30+analyzer.quote_sampled=false+normalize_teacher_adv=true'
# refuse_emulated_bf16 DTYPE ADVICE: exit 2 where DTYPE=bfloat16 would run on a CPU without AVX512-BF16 or AMX,
#   unless SLOW_BF16=1. torch emulates bf16 matmuls there: on an AVX2-only EPYC one step of SmolLM2's SFT took 8 min
#   (8.5 s on machine D), so a SmolLM2 driver would take days (docs/STUDIES.md, "bf16 on a CPU without
#   AVX512-BF16"). The flags are opid_rllib/hardware.py's BF16_FLAGS; CPUINFO= is for the tests.
refuse_emulated_bf16() {
  local cpuinfo=${CPUINFO:-/proc/cpuinfo}
  if [ "$1" = bfloat16 ] && [ -z "${SLOW_BF16:-}" ] && [ -r "$cpuinfo" ] \
     && ! grep -qwE 'avx512_bf16|amx_bf16|bf16' "$cpuinfo"; then
    echo "DTYPE=bfloat16 on a CPU without AVX512-BF16 or AMX (none in $cpuinfo): bf16 is emulated here, many" \
         "times slower; $2, or set SLOW_BF16=1 to run it anyway" >&2
    exit 2
  fi
}
