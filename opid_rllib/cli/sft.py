"""`opid-sft`: behaviour-cloning warm start of a policy from an env's expert trajectories.

    opid-sft --env alfworld --model tiny --out runs/sft-tiny [--tasks 200] [--epochs 3] [--lr 3e-3]
             [--history-length 5] [--max-steps 30] [--skill-fraction 0.3] [--seed 0]

Writes a Hugging Face model folder to --out (weights, tokenizer, generation config) that
`AutoModelForCausalLM`, `opid_rllib.models.resolve_model(path)` and OPID's `model=` accept, plus
`sft_stats.json` (demos, tokens, loss curve, wall times). --policy-tasks N adds DAgger samples: --model
first plays N other games, and the env expert labels each state it reached (opid_rllib/sft/dagger.py; with
--tasks 0 those are the whole data set). Use the same --history-length,
--max-prompt-len and thinking setting as the RL run: the prompts are the runner's.

Long runs: progress lines (step/total, loss, elapsed, ETA) go to stderr every --progress-every-s
seconds, and each epoch end saves a checkpoint in --out/sft_checkpoint/. Re-running the same
command after a stop resumes from it (same final weights as an uninterrupted run); --no-resume
starts over.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from opid_rllib.cli import env_kwargs_arg, warn_slow_dtype
from opid_rllib.settings import SFT_DTYPE_NAMES
from opid_rllib.sft.checkpoint import CHECKPOINT_DIR

DEFAULT_LR_TINY = 3e-3
DEFAULT_LR_PRETRAINED = 2e-5


class CliError(Exception):
    """A bad input, reported as `opid-sft: error: ...` with exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="opid-sft", description="Behaviour-cloning warm start from expert trajectories.")
    ap.add_argument("--env", required=True, help="alfworld | webshop | searchqa | signpost (or the gymnasium id)")
    ap.add_argument("--model", default="tiny", help="tiny | smollm2-135m | local HF folder | cached hub id")
    ap.add_argument("--out", required=True, help="output model folder (must be empty or new unless --overwrite)")
    ap.add_argument("--cpu-example", action="store_true",
                    help="the warm start `opid-train --env alfworld --cpu-example` trains from: the tiny model cloned "
                         "on the expert's play of its six games, 8 plays each, 14 epochs (about 10 min on 2 cores, "
                         "built once into the model cache); --tasks (plays in all), --epochs, --lr, --batch-size, "
                         "--seed change it, other demo flags are its own")
    ap.add_argument("--split", default="train", help="env split the demonstrations come from (default train)")
    ap.add_argument("--tasks", type=int, default=200, help="number of tasks the expert plays (seeded sample)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=None,
                    help=f"AdamW peak lr (default {DEFAULT_LR_TINY} for tiny, {DEFAULT_LR_PRETRAINED} otherwise)")
    ap.add_argument("--batch-size", type=int, default=8, help="demos per optimizer step")
    ap.add_argument("--max-tokens-per-micro", type=int, default=8192,
                    help="padded tokens per micro-batch (gradient accumulation inside a batch)")
    ap.add_argument("--history-length", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--max-prompt-len", type=int, default=2048)
    ap.add_argument("--skill-fraction", type=float, default=0.3,
                    help="share of demo episodes with skills in the prompt")
    ap.add_argument("--step-skill-wording", choices=("plain", "analyzer"), default="plain",
                    help="plain: 'At this point, X.'; analyzer: the hindsight analyzer's RL-time wording, mostly "
                         "'At this point, X instead of 'Y'.' with a random wrong Y (a skill-literate warm start)")
    ap.add_argument("--deviation-prob", type=float, default=0.0,
                    help="per-step chance of a random wrong command before the expert's (recovery states, "
                         "DAgger-style; not demonstrated, only history). Default 0")
    ap.add_argument("--deviation-repeat-prob", type=float, default=0.0,
                    help="share of those deviations that repeat the previous command instead (in ALFWorld a no-op, "
                         "'Nothing happens.': the loop a cloned student falls into). Default 0")
    ap.add_argument("--response-style", choices=("reasoned", "action"), default="reasoned",
                    help="target responses: 'reasoned' (short reasoning + command) or 'action' (empty think block + "
                         "command: a third of the tokens to generate; ALFWorld/WebShop)")
    ap.add_argument("--hint-follow-prob", type=float, default=0.0,
                    help="per demonstrated step, chance of one extra sample whose step skill names another admissible "
                         "command, with that command as target: teaches the policy to read skills (0 = off)")
    ap.add_argument("--demonstrator", default="expert",
                    help="who plays the demo games: 'expert' (the env's expert plan) or an env's own demonstrator, "
                         "e.g. alfworld's 'sweep' (acts only on what the prompt shows, so a small student can copy it)")
    ap.add_argument("--policy-tasks", type=int, default=0,
                    help="DAgger: --model first plays this many other games of --split, and every state it reaches "
                         "gets a sample labelled with the env expert's next command (0 = off; needs an expert plan)")
    ap.add_argument("--policy-temperature", type=float, default=0.4, help="sampling temperature of those games")
    ap.add_argument("--policy-max-new-tokens", type=int, default=48, help="response cap of those games")
    ap.add_argument("--enable-thinking", action="store_true", help="chat template with thinking on (match the RL run)")
    ap.add_argument("--env-kwargs", default="{}",
                    help="JSON dict passed to envs.make (e.g. '{\"expert\": \"sweep\"}' for ALFWorld)")
    ap.add_argument("--time-budget-s", type=float, default=None, help="stop training after this many seconds")
    ap.add_argument("--log-every", type=int, default=0, help="also print the loss every N optimizer steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch CPU threads (default: 1 without CUDA, torch's own where OMP_NUM_THREADS is set; "
                         "one was many times faster on a busy 2-core machine)")
    ap.add_argument("--dtype", choices=SFT_DTYPE_NAMES, default="float32",
                    help="compute dtype of training (fp32 weights, bf16 autocast) and of the --policy-tasks games "
                         "(bf16 weights); bfloat16 pays off where the CPU has AVX512-BF16/AMX (bench/dtype_speed.py)")
    ap.add_argument("--overwrite", action="store_true", help="allow writing into a non-empty --out")
    ap.add_argument("--no-resume", action="store_true",
                    help="ignore a partial run's checkpoint in --out and start over (default: resume from it)")
    ap.add_argument("--progress-every-s", type=float, default=10.0,
                    help="seconds between progress/ETA lines on stderr (negative: none)")
    return ap


def _check(args) -> dict:
    import envs

    try:
        args.env = envs.env_name_of(args.env)
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.tasks < 1 and args.policy_tasks < 1:
        raise CliError(f"--tasks={args.tasks}: must be >= 1 (or 0 with --policy-tasks >= 1)")
    for key, ok in (("tasks", args.tasks >= 0), ("policy_tasks", args.policy_tasks >= 0),
                    ("policy_temperature", args.policy_temperature >= 0),
                    ("policy_max_new_tokens", args.policy_max_new_tokens >= 1), ("epochs", args.epochs >= 1),
                    ("batch_size", args.batch_size >= 1),
                    ("max_steps", args.max_steps >= 1), ("max_prompt_len", args.max_prompt_len >= 16),
                    ("history_length", args.history_length >= 0),
                    ("max_tokens_per_micro", args.max_tokens_per_micro >= 1),
                    ("skill_fraction", 0.0 <= args.skill_fraction <= 1.0),
                    ("hint_follow_prob", 0.0 <= args.hint_follow_prob <= 1.0),
                    ("lr", args.lr is None or args.lr > 0)):
        if not ok:
            raise CliError(f"--{key.replace('_', '-')}={getattr(args, key)}: out of range "
                           "(tasks/policy-tasks >= 0, epochs/batch-size/max-steps/policy-max-new-tokens >= 1, "
                           "policy-temperature >= 0, max-prompt-len >= 16, history-length >= 0, "
                           "skill-fraction and hint-follow-prob in [0, 1], lr > 0)")
    try:
        envs.make_demonstrator(args.env, args.demonstrator)
    except ValueError as e:
        raise CliError(f"--demonstrator: {e}") from None
    if args.demonstrator != "expert" and args.policy_tasks >= 1:
        raise CliError(f"--demonstrator {args.demonstrator} with --policy-tasks {args.policy_tasks}: policy states are "
                       "labelled by the env's expert; use one of the two (ALFWorld: --env-kwargs "
                       "'{\"expert\": \"sweep\"}' labels them with the sweep's commands)")
    try:
        env_kwargs = env_kwargs_arg(args.env_kwargs)
    except ValueError as e:
        raise CliError(str(e)) from None
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} exists and is not a directory")
    partial = (out / CHECKPOINT_DIR).is_dir() and not args.no_resume  # a stopped run of this command: resume
    if out.is_dir() and any(out.iterdir()) and not args.overwrite and not partial:
        raise CliError(f"--out {out} is not empty; pass --overwrite to write into it")
    return env_kwargs


def run(args) -> dict:
    from opid_rllib.hardware import numerics_record
    from opid_rllib.models import ModelResolutionError, resolve_model
    from opid_rllib.sft.checkpoint import ResumeMismatch
    from opid_rllib.sft.demos import collect_demonstrations
    from opid_rllib.sft.progress import Progress
    from opid_rllib.sft.train import STATS_FILE, train_sft

    t0 = time.perf_counter()
    env_kwargs = _check(args)
    if args.torch_threads is not None and args.torch_threads < 1:
        raise CliError(f"--torch-threads={args.torch_threads}: must be >= 1")
    from opid_rllib.quiet import set_cli_torch_threads

    set_cli_torch_threads(args.torch_threads)  # default: 1 without CUDA (quiet.default_torch_threads)
    warn_slow_dtype("opid-sft", args.dtype)
    try:
        model_path = resolve_model(args.model)
    except ModelResolutionError as e:
        raise CliError(str(e)) from None
    lr = args.lr if args.lr is not None else (DEFAULT_LR_TINY if args.model == "tiny" else DEFAULT_LR_PRETRAINED)
    print(f"[opid-sft] env={args.env} split={args.split} model={model_path} out={args.out}", flush=True)

    cstats: dict = {}
    demos = []
    if args.tasks >= 1:
        try:
            demos = collect_demonstrations(
                args.env, split=args.split, num_tasks=args.tasks, history_length=args.history_length,
                max_steps=args.max_steps, seed=args.seed, skill_fraction=args.skill_fraction, env_kwargs=env_kwargs,
                stats=cstats, step_skill_wording=args.step_skill_wording, deviation_prob=args.deviation_prob,
                deviation_repeat_prob=args.deviation_repeat_prob,
                response_style=args.response_style, hint_follow_prob=args.hint_follow_prob,
                demonstrator=args.demonstrator,
                progress=Progress(args.tasks, prefix=f"[opid-sft] {args.demonstrator}", unit="game",
                                  every_s=args.progress_every_s).update)
        except (ValueError, KeyError) as e:
            raise CliError(f"collecting demonstrations failed: {e}") from None
        print(f"[opid-sft] {args.demonstrator} won {cstats['episodes_won']}/{cstats['episodes_tried']} episodes -> "
              f"{len(demos)} demos ({cstats['episodes_with_skills']} episodes with skills) in "
              f"{time.perf_counter() - t0:.1f}s",
              flush=True)
    pstats: dict = {}
    if args.policy_tasks >= 1:
        from opid_rllib.sft.dagger import collect_policy_demos

        t_pol = time.perf_counter()
        try:
            pdemos = collect_policy_demos(
                str(model_path), args.env, split=args.split, num_tasks=args.policy_tasks,
                history_length=args.history_length, max_steps=args.max_steps, seed=args.seed,
                max_new_tokens=args.policy_max_new_tokens, temperature=args.policy_temperature, env_kwargs=env_kwargs,
                response_style=args.response_style, hint_follow_prob=args.hint_follow_prob, dtype=args.dtype,
                stats=pstats,
                progress=Progress(args.policy_tasks, prefix="[opid-sft] policy", unit="game",
                                  every_s=args.progress_every_s).update)
        except (ValueError, KeyError) as e:
            raise CliError(f"--policy-tasks: collecting policy-state demonstrations failed: {e}") from None
        if pstats["labelled_states"] == 0:
            raise CliError(f"--policy-tasks: env={args.env} gave no expert plan at any state the policy reached "
                           "(info['expert_actions']); policy-state samples need an env with an expert")
        print(f"[opid-sft] policy won {pstats['policy_won']}/{pstats['policy_episodes']} games; "
              f"{pstats['labelled_states']} distinct states labelled by the expert (policy agreed at "
              f"{pstats['policy_agreed']}) -> {len(pdemos)} demos in {time.perf_counter() - t_pol:.1f}s", flush=True)
        demos = demos + pdemos
    collect_s = time.perf_counter() - t0
    if not demos:
        raise CliError(f"the {args.demonstrator} won none of the {cstats['episodes_tried']} episodes of "
                       f"env={args.env} split={args.split} within --max-steps {args.max_steps}; nothing to clone")

    try:
        out = train_sft(model_path, demos, args.out, epochs=args.epochs, lr=lr, batch_size=args.batch_size,
                        max_prompt_len=args.max_prompt_len, seed=args.seed,
                        max_tokens_per_micro=args.max_tokens_per_micro, enable_thinking=args.enable_thinking,
                        log_every=args.log_every, time_budget_s=args.time_budget_s, resume=not args.no_resume,
                        progress_every_s=args.progress_every_s, dtype=args.dtype, log=lambda m: print(m, flush=True))
    except ResumeMismatch as e:
        raise CliError(str(e)) from None
    stats_path = Path(out) / STATS_FILE
    stats = json.loads(stats_path.read_text())
    stats.update({"machine": numerics_record(), "env": args.env, "split": args.split, "model": args.model,
                  "collection": cstats, "policy_states": pstats, "policy_tasks": args.policy_tasks,
                  "history_length": args.history_length, "max_steps": args.max_steps,
                  "skill_fraction": args.skill_fraction, "step_skill_wording": args.step_skill_wording,
                  "deviation_prob": args.deviation_prob, "deviation_repeat_prob": args.deviation_repeat_prob,
                  "enable_thinking": bool(args.enable_thinking),
                  "response_style": args.response_style, "hint_follow_prob": args.hint_follow_prob,
                  "demonstrator": args.demonstrator, "collect_seconds": collect_s,
                  "wall_seconds": time.perf_counter() - t0})
    stats_path.write_text(json.dumps(stats, indent=2) + "\n")
    loss = "n/a" if stats["final_eval_loss"] is None else f"{stats['final_eval_loss']:.4f}"
    print(f"[opid-sft] wrote the warm-started model to {out} ({stats['demos']} demos, {stats['tokens']} tokens, "
          f"final weights' loss {loss}, {stats['wall_seconds']:.0f}s); stats and the loss curve in {stats_path}",
          flush=True)
    return stats


def run_cpu_example(args, given: set) -> Path:
    """--cpu-example: build (or reuse) the CPU example's warm start (opid_rllib/sft/cpu_example.py), copy it to --out."""
    import shutil

    from envs.alfworld.panels import CPU_EXAMPLE_GAMES
    from opid_rllib.sft.cpu_example import WARM_START, warm_start

    _check(args)
    if args.env != "alfworld":
        raise CliError(f"--cpu-example: the CPU example's warm start is on ALFWorld, not --env {args.env}")
    changes = {k: getattr(args, k) for k in ("epochs", "lr", "seed", "batch_size", "model") if k in given}
    if "tasks" in given:
        changes["repeats"] = max(1, -(-args.tasks // len(CPU_EXAMPLE_GAMES)))
    ws = dict(WARM_START, **changes)
    print(f"[opid-sft] the CPU example's warm start: {len(CPU_EXAMPLE_GAMES)} games x {ws['repeats']} plays, "
          f"{ws['epochs']} epochs (built once into the model cache, then copied to {args.out})", flush=True)
    from opid_rllib.quiet import set_cli_torch_threads

    set_cli_torch_threads(args.torch_threads)
    src = warm_start(progress_every_s=args.progress_every_s, **changes)
    shutil.copytree(src, args.out, dirs_exist_ok=True)
    print(f"[opid-sft] wrote the warm-started model to {args.out} (a copy of {src}); next: opid-train --env alfworld "
          f"--cpu-example --model {args.out}", flush=True)
    return Path(args.out)


def given_flags(argv) -> set:
    """The dests of the flags written on the command line (not their defaults)."""
    ap = build_parser()
    for action in ap._actions:
        action.default = argparse.SUPPRESS
        action.required = False
    return set(vars(ap.parse_known_args(argv)[0]))


def main(argv=None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    try:
        if args.cpu_example:
            run_cpu_example(args, given_flags(sys.argv[1:] if argv is None else argv))
            return 0
        run(args)
    except CliError as e:
        print(f"opid-sft: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
