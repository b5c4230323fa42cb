"""`opid-export CHECKPOINT OUT_DIR`: write the trained policy as a Hugging Face folder."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="opid-export", description=__doc__)
    p.add_argument("checkpoint", help="checkpoint directory written by opid-train")
    p.add_argument("out_dir", help="where to write the HF folder")
    args = p.parse_args(argv)
    from opid_rllib.export import export_checkpoint

    try:
        out = export_checkpoint(args.checkpoint, args.out_dir)
    except FileNotFoundError as e:
        print(f"opid-export: {e}", file=sys.stderr)
        return 2
    print(f"[opid-export] wrote the policy (a Hugging Face folder: weights, config, tokenizer) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
