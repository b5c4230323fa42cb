"""`opid-export CHECKPOINT OUT_DIR`: write the trained policy as a Hugging Face folder."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="opid-export", description=__doc__)
    p.add_argument("checkpoint", help="a checkpoint_XXXXXX folder written by opid-train (it prints where)")
    p.add_argument("out_dir", help="where to write the HF folder")
    args = p.parse_args(argv)
    from opid_rllib.export import checkpoint_problem, export_checkpoint

    problem = checkpoint_problem(args.checkpoint)  # before Ray and torch load: one line, in a second
    if problem:
        print(f"opid-export: error: {problem}", file=sys.stderr)
        return 2
    print(f"[opid-export] loading the policy from {args.checkpoint} (Ray, torch and the weights: seconds)", flush=True)
    out = export_checkpoint(args.checkpoint, args.out_dir)
    print(f"[opid-export] wrote the policy (a Hugging Face folder: weights, config, tokenizer) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
