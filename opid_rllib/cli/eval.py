"""`opid-eval`: evaluate a policy on a fixed panel in the deployment setting (no analyzer, no skills).

    opid-eval [--env alfworld] [--panel alfworld/valid_unseen@v1] --model tiny|smollm2-135m|PATH \
        [--episodes N] [--temperature 0.4] [--max-new-tokens 256] [--max-steps 30] [--history-length 5] \
        [--batch-envs 16] [--seed 0] [--output DIR]

Prints the paper's table (success % per category, Avg, All, format-valid rate, mean length) and
writes DIR/results.json and DIR/episodes.jsonl. See opid_rllib/eval/.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from opid_rllib.cli import json_object_arg, key_value_args, warn_slow_dtype
from opid_rllib.eval.panel import ENV_DEFAULTS, ENV_NAMES, MAIN_PANELS, EvalError
from opid_rllib.generation.registry import BACKENDS
from opid_rllib.presets import model_default
from opid_rllib.settings import DTYPE_NAMES

DEFAULT_MAX_NEW_TOKENS = 256
CHUNKS = "chunks.jsonl"  # a running play's finished chunks in --output (--resume reads them)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="opid-eval",
        description="Evaluate a policy on a fixed evaluation panel (no analyzer, no skills) and print "
                    "the paper's success table.")
    ap.add_argument("--env", choices=ENV_NAMES, default=None,
                    help="env of the panel (checked against it; default: the panel's env)")
    ap.add_argument("--panel", default=None, help="panel name (default: the env's main panel: " +
                    ", ".join(MAIN_PANELS.values()) + "; --env defaults to alfworld; list them with "
                    "python -c 'import envs.panels as p; print(p.list_panels())')")
    ap.add_argument("--model", required=True, help="'tiny', 'smollm2-135m', or a local Hugging Face model folder")
    ap.add_argument("--episodes", type=int, default=None,
                    help="play N of the panel's games, taken in turn from each task type, and say which (default: all)")
    ap.add_argument("--temperature", type=float, default=0.4, help="sampling temperature; 0 = greedy (default 0.4)")
    ap.add_argument("--max-new-tokens", type=int, default=None,
                    help=f"response token cap per step (default: 48 for --model tiny, else {DEFAULT_MAX_NEW_TOKENS}); "
                         "generation also stops after the env's closing action tag")
    ap.add_argument("--max-steps", type=int, default=None,
                    help="episode step cap (default per env: " +
                         ", ".join(f"{k} {v['max_steps']}" for k, v in ENV_DEFAULTS.items()) + ")")
    ap.add_argument("--history-length", type=int, default=None,
                    help="past (obs, action) pairs shown in the prompt (default per env: " +
                         ", ".join(f"{k} {v['history_length']}" for k, v in ENV_DEFAULTS.items()) + ")")
    ap.add_argument("--max-prompt-len", type=int, default=2048,
                    help="prompt tokens kept (left-truncated; default 2048)")
    ap.add_argument("--batch-envs", type=int, default=16, help="episodes played (and generated) together (default 16)")
    ap.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    ap.add_argument("--dtype", choices=DTYPE_NAMES, default="float32")
    ap.add_argument("--backend", choices=BACKENDS, default="hf", help="generation backend (default hf)")
    ap.add_argument("--output", default=None,
                    help="output dir (default ./outputs/eval/<panel>-<UTC timestamp>)")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch CPU threads (default: 1 without CUDA, torch's own where OMP_NUM_THREADS is set; "
                         "one was many times faster on a busy 2-core machine)")
    ap.add_argument("--skills", choices=("none", "oracle"), default="none",
                    help="none (default): the policy as deployed. oracle: also play as the skill teacher (the "
                         "step skill naming the env's expert next action at every step, in the hindsight analyzer's "
                         "wording) and print student, teacher and skill headroom side by side: whether OPID's "
                         "skill term can help this model")
    ap.add_argument("--analyzer-option", action="append", default=None, metavar="KEY=VALUE",
                    help="with --skills oracle: the wording of the oracle's step skill, as opid-train's "
                         "--analyzer-option gives it to the hindsight analyzer; quote_sampled=false names the "
                         "expert's command without quoting the sampled one (the only option the oracle reads)")
    ap.add_argument("--env-kwargs", default="{}",
                    help="JSON dict added to the panel's env settings, e.g. '{\"expert\": \"sweep\"}' (ALFWorld: "
                         "the oracle names the sweep demonstrator's next command instead of the hand-coded expert's)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--resume", action="store_true",
                    help="go on with a play cut short in --output: the chunks of games it finished "
                         "(OUTPUT/chunks.jsonl, kept while a play runs) with the same weights, panel, settings and "
                         "seed are read back instead of played")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.torch_threads is not None and args.torch_threads < 1:
        print(f"opid-eval: error: --torch-threads {args.torch_threads}: must be >= 1", file=sys.stderr)
        return 2
    import torch

    from opid_rllib.quiet import TORCH_THREADS_ENV, set_cli_torch_threads

    threads_before, env_before = torch.get_num_threads(), os.environ.get(TORCH_THREADS_ENV)
    set_cli_torch_threads(args.torch_threads)
    try:
        return _run(args)
    finally:  # main() may be called in-process (tests): leave torch and the environment as found
        torch.set_num_threads(threads_before)
        if env_before is None:
            os.environ.pop(TORCH_THREADS_ENV, None)
        else:
            os.environ[TORCH_THREADS_ENV] = env_before


def _run(args) -> int:
    from opid_rllib.paper_table import format_table
    from opid_rllib.eval.panel import default_output_dir, evaluate, write_results

    warn_slow_dtype("opid-eval", args.dtype)
    panel = args.panel or MAIN_PANELS.get(args.env or "alfworld")
    max_new_tokens = args.max_new_tokens
    if max_new_tokens is None:
        max_new_tokens = model_default(args.model, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    try:
        env_kwargs = json_object_arg("--env-kwargs", args.env_kwargs)
        oracle_options = key_value_args("--analyzer-option", args.analyzer_option)
    except ValueError as e:
        print(f"opid-eval: error: {e}", file=sys.stderr)
        return 2
    if args.output and os.path.exists(args.output) and not os.path.isdir(args.output):
        print(f"opid-eval: error: --output {args.output}: is a file; give a folder (it holds results.json and the "
              "played chunks)", file=sys.stderr)
        return 2
    if args.resume and not args.output:
        print("opid-eval: error: --resume goes on with the play in --output DIR: give the --output of the play "
              "that was cut short", file=sys.stderr)
        return 2
    chunk_log = os.path.join(args.output, CHUNKS) if args.output else None
    try:
        res = evaluate(panel=panel, env=args.env, episodes=args.episodes, seed=args.seed,
                       batch_envs=args.batch_envs, progress=not args.no_progress, temperature=args.temperature,
                       llm_model=args.model, max_new_tokens=max_new_tokens, max_steps=args.max_steps,
                       history_length=args.history_length, max_prompt_len=args.max_prompt_len, dtype=args.dtype,
                       generation_backend=args.backend, skills=args.skills, env_kwargs=env_kwargs,
                       oracle_options=oracle_options, chunk_log=chunk_log, resume=args.resume)
    except EvalError as e:
        print(f"opid-eval: error: {e}", file=sys.stderr)
        return 2
    out = write_results(res, args.output or default_output_dir(res["config"]["panel"]))
    if chunk_log is not None and os.path.exists(chunk_log):  # the play ended: episodes.jsonl holds its games
        os.remove(chunk_log)
    resumed = sum(res["timing"].get("resumed_episodes", {}).values())
    if resumed:
        print(f"resumed: {resumed} games read back from {chunk_log}, not played again")
    print(format_table(res))
    if "teacher_table" in res:
        from opid_rllib.eval.headroom import format_headroom

        print(format_headroom(res["table"], res["teacher_table"]))
    print(f"wrote {out / 'results.json'} and {out / 'episodes.jsonl'} ({len(res['episodes'])} episodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
