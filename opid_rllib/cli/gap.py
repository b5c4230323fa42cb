"""`opid-gap`: before training, does OPID's skill term have a better teacher to distil? (opid_rllib/eval/gap.py)

    opid-gap --example signpost_skills [--hint-share 1.0]     # a tuned example's base, settings and tasks
    opid-gap --example alfworld_rung1 [--base smollm2] [--oracle]
    opid-gap --env alfworld --model PATH --tasks 32 [--analyzer hindsight|openai] [--analyzer-option K=V] \
        [--episode-skill-adv-weight W] [--step-skill-adv-weight W] [--skill-routing critical_first] \
        [--temperature 1.0] [--max-steps 30] [--max-new-tokens 48] [--json OUT]

Plays the tasks as the student (plain prompts; the analyzer writes skills), then as the self-teacher (same tasks and
seeds, each step's prompt carrying the skill OPID's re-score would insert there), and prints both success rates, the
gap, Delta per token on and off the expert's plan, and a verdict line. No Ray; one process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

# The tuned examples that define gap_setup(**kw) -> (config, task ids).
EXAMPLES = ("signpost_skills", "alfworld_rung1")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="opid-gap", description=__doc__.split("\n\n")[0])
    ap.add_argument("--example", choices=EXAMPLES, default=None,
                    help="measure a tuned example's base on its own tasks and settings (builds the base once)")
    ap.add_argument("--hint-share", type=float, default=None,
                    help="--example signpost_skills: the base's share of skill samples (default 1.0)")
    ap.add_argument("--base", choices=("tiny", "smollm2"), default=None,
                    help="--example alfworld_rung1: the tiny model's base (default) or SmolLM2-135M's")
    ap.add_argument("--copies", type=int, default=None,
                    help="--example alfworld_rung1: plays of each of its six games (default 8)")
    ap.add_argument("--oracle", action="store_true",
                    help="also play with the env expert's next command as the skill at every step (the ceiling)")
    ap.add_argument("--env", default=None, help="alfworld | webshop | searchqa | signpost (without --example)")
    ap.add_argument("--model", default=None, help="'tiny', a Hugging Face folder or hub id (without --example)")
    ap.add_argument("--env-config", action="append", default=[], metavar="K=V", help="env setting (repeatable)")
    ap.add_argument("--tasks", default="32", help="how many train tasks (the first N), or comma-separated task ids")
    ap.add_argument("--analyzer", default="hindsight", help="hindsight | openai (OPENAI_API_KEY, OPENAI_BASE_URL)")
    ap.add_argument("--analyzer-option", action="append", default=[], metavar="K=V")
    ap.add_argument("--episode-skill-adv-weight", type=float, default=None)
    ap.add_argument("--step-skill-adv-weight", type=float, default=None)
    ap.add_argument("--skill-routing", default=None, help="critical_first (default) | additive | ...")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--history-length", type=int, default=None)
    ap.add_argument("--temperature", type=float, default=None,
                    help="sampling temperature of both plays (default: the config's training temperature)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-envs", type=int, default=16)
    ap.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--json", default=None, help="write the result here")
    return ap


def _config_from_flags(args):
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.cli import key_value_args
    from opid_rllib.presets import apply_settings, model_default

    if not args.env or not args.model:
        raise ValueError("give --example NAME, or both --env and --model")
    env_config = key_value_args("--env-config", args.env_config)
    llm = {k: v for k, v in (("max_steps", args.max_steps), ("history_length", args.history_length),
                             ("max_new_tokens", args.max_new_tokens or model_default(args.model, "max_new_tokens")))
           if v is not None}
    cfg = OPIDConfig().environment(args.env, env_config=env_config).llm(llm_model=args.model, **llm)
    # as opid-train: the hindsight analyzer's research switches (quote_sampled, ...) go to experimental()
    apply_settings(cfg, analyzer=args.analyzer, analyzer_config=key_value_args("--analyzer-option", args.analyzer_option))
    import envs

    if args.tasks.strip().isdigit():
        probe = envs.make(args.env, **env_config)
        tasks = list(probe.task_ids())[: int(args.tasks)]
        probe.close()
    else:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    return cfg, tasks


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from opid_rllib.quiet import set_cli_torch_threads

    if args.torch_threads < 1:
        print(f"opid-gap: error: --torch-threads {args.torch_threads}: must be >= 1", file=sys.stderr)
        return 2
    set_cli_torch_threads(args.torch_threads)
    try:
        if args.example:
            kw = {} if args.hint_share is None else {"hint_share": args.hint_share}
            if kw and args.example != "signpost_skills":
                raise ValueError("--hint-share: only with --example signpost_skills")
            rung1 = {k: v for k, v in (("base", args.base), ("copies", args.copies)) if v is not None}
            if rung1 and args.example != "alfworld_rung1":
                raise ValueError("--base, --copies: only with --example alfworld_rung1")
            kw.update(rung1)
            cfg, tasks = importlib.import_module(f"tuned_examples.{args.example}").gap_setup(**kw)
        else:
            cfg, tasks = _config_from_flags(args)
        weights = {k: v for k, v in (("episode_skill_adv_weight", args.episode_skill_adv_weight),
                                     ("step_skill_adv_weight", args.step_skill_adv_weight),
                                     ("skill_routing", args.skill_routing)) if v is not None}
        if weights:
            cfg.training(**weights)
        cfg.validate()
    except (ValueError, TypeError) as e:
        print(f"opid-gap: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    from opid_rllib.eval.gap import measure_gap

    try:
        result = measure_gap(cfg, tasks, temperature=args.temperature, seed=args.seed, batch_envs=args.batch_envs,
                             oracle=args.oracle, log=lambda m: print(m, file=sys.stderr, flush=True))
    except ValueError as e:
        print(f"opid-gap: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    result["example"] = args.example
    result["model"] = str(cfg.llm_model)
    d = result["delta"]
    fmt = lambda v: "-" if v is None else f"{v:+.3f}"  # noqa: E731
    print(f"student {result['student_success_pct']:.1f} %  teacher {result['teacher_success_pct']:.1f} %  "
          f"gap {result['gap_points']:+.1f} points  ({result['episodes']} episodes each, T {result['temperature']})")
    print(f"Delta per token: on the expert's plan {fmt(d['on_plan']['delta_per_token'])} "
          f"({d['on_plan']['steps']} steps), off it {fmt(d['off_plan']['delta_per_token'])} "
          f"({d['off_plan']['steps']} steps)")
    if "oracle_success_pct" in result:
        print(f"oracle (the expert's next command as the skill at every step): {result['oracle_success_pct']:.1f} %")
    print(f"verdict: {result['verdict']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"[opid-gap] wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
