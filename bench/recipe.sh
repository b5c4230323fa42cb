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
