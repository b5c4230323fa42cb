"""How well a warm-started model reproduces a demonstrator's decisions, by verb (opid_rllib/sft/fit.py): on the
demonstrator's games of a split, the share of states where greedy decoding writes the demonstrated command.

    python -m studies.decision_fit --model runs/sweep/stage6 --demonstrator sweep --splits train,valid_unseen

Skill-free prompts only (what the student sees). Train: does it fit its data; valid_unseen: does it generalise.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--demonstrator", default="expert", help="expert | an env demonstrator (alfworld: sweep)")
    ap.add_argument("--splits", default="train,valid_unseen")
    ap.add_argument("--tasks", type=int, default=25, help="games per split (a seeded sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--response-style", choices=("reasoned", "action"), default="action")
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write the tables here")
    args = ap.parse_args(argv)

    import torch

    from opid_rllib.models import load_model, load_tokenizer, resolve_model
    from opid_rllib.sft.demos import collect_demonstrations
    from opid_rllib.sft.fit import by_verb, format_by_verb, reproduced

    torch.set_num_threads(args.torch_threads)
    path = resolve_model(args.model)
    tok, model = load_tokenizer(path), load_model(path)
    result = {"model": str(args.model), "demonstrator": args.demonstrator, "tasks": args.tasks, "seed": args.seed,
              "command": "python -m studies.decision_fit " + " ".join(argv if argv is not None else sys.argv[1:])}
    for split in [s for s in args.splits.split(",") if s]:
        stats: dict = {}
        demos = collect_demonstrations(args.env, split=split, num_tasks=args.tasks, history_length=args.history_length,
                                       max_steps=args.max_steps, seed=args.seed, skill_fraction=0.0,
                                       response_style=args.response_style, demonstrator=args.demonstrator,
                                       stats=stats)
        table = by_verb(demos, reproduced(model, tok, demos))
        result[split] = {"games_won_by_demonstrator": stats["episodes_won"], "by_verb": table}
        print(f"{split} ({stats['episodes_won']}/{args.tasks} games, {len(demos)} states): {format_by_verb(table)}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
