"""Learning benchmark: GRPO vs OPID (and ablations) from the same warm-started base, several seeds.

    python bench/learning.py --base tiny --presets grpo,opid --seeds 0,1,2 --iters 10 \
        --eval-panel alfworld/valid_unseen@v1 --eval-episodes 126 --out runs/learning

`--base tiny` first warm-starts the tiny model with opid-sft (same SFT for every run); `--base PATH`
uses an existing HF folder (e.g. an SFT'd model or smollm2-135m). Every (preset, seed) run trains with
the same budget, then its policy is evaluated on the fixed panel with no analyzer and no skills (the
deployment setting). Prints the paper's table (Pick, Look, Clean, Heat, Cool, Pick2, Avg, All) as
mean +- std over seeds, success-vs-iteration curves, and the Delta log-prob statistics that tell
whether the base model reacts to skills at all. Everything is written to --out/learning.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def warm_start(args) -> str:
    if args.base != "tiny":
        return args.base
    from opid_rllib.models import resolve_model
    from opid_rllib.sft import collect_demonstrations, train_sft

    out = os.path.join(args.out, "sft_base")
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    demos = collect_demonstrations("alfworld", split="train", num_tasks=args.sft_tasks, history_length=args.history_length,
                                   max_steps=30, seed=0)
    train_sft(resolve_model("tiny"), demos, out, epochs=args.sft_epochs, lr=3e-3, batch_size=4,
              max_prompt_len=args.max_prompt_len, seed=0)
    return out


def train_and_eval(base: str, preset: str, seed: int, args) -> dict:
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.evaluation import evaluate
    from opid_rllib.presets import CPU_TINY, apply_preset

    cfg = OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": args.max_steps})
    cfg = apply_preset(cfg, "opid", **dict(CPU_TINY, llm_model=base, max_steps=args.max_steps,
                                            history_length=args.history_length, tasks_per_iter=args.tasks_per_iter,
                                            group_size=args.group_size, max_prompt_len=args.max_prompt_len))
    cfg = apply_preset(cfg, preset).debugging(seed=seed)
    cfg.analyzer_settings(run_dir=os.path.join(args.out, f"{preset}-s{seed}"))
    algo = cfg.build_algo()
    curve, deltas = [], []
    t0 = time.time()
    for _ in range(args.iters):
        r = algo.train()
        curve.append(float(r.get("opid", {}).get("success_rate", float("nan"))))
        lo = r.get("learners", {}).get("opid", {})
        deltas.append({k: lo.get(k, {}).get("token_mean") for k in ("delta_ep", "delta_step")})
    policy = os.path.join(args.out, f"{preset}-s{seed}", "policy")
    module = algo.learner_group._learner.module["default_policy"].unwrapped()
    module.model.save_pretrained(policy)
    module.tokenizer.save_pretrained(policy)
    train_s = time.time() - t0
    algo.stop()
    ev = evaluate(panel=args.eval_panel, episodes=args.eval_episodes, seed=seed, progress=False,
                  temperature=args.eval_temperature, llm_model=policy, max_steps=args.max_steps,
                  history_length=args.history_length, max_new_tokens=CPU_TINY["max_new_tokens"])
    return {"preset": preset, "seed": seed, "curve": curve, "deltas": deltas, "train_s": train_s,
            "table": ev["table"]}


def report(runs: list[dict]) -> str:
    cols = runs[0]["table"]["columns"]
    lines = [f"{'preset':<18}" + "".join(f"{c:>14}" for c in cols)]
    for preset in dict.fromkeys(r["preset"] for r in runs):
        rs = [r for r in runs if r["preset"] == preset]
        cells = []
        for c in cols:
            v = [r["table"]["success_pct"][c] for r in rs if r["table"]["success_pct"][c] is not None]
            cells.append("-" if not v else f"{statistics.mean(v):.1f}+-{statistics.pstdev(v):.1f}")
        lines.append(f"{preset:<18}" + "".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="tiny")
    p.add_argument("--presets", default="grpo,opid")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--tasks-per-iter", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--history-length", type=int, default=2)
    p.add_argument("--max-prompt-len", type=int, default=1024)
    p.add_argument("--sft-tasks", type=int, default=120)
    p.add_argument("--sft-epochs", type=int, default=2)
    p.add_argument("--eval-panel", default="alfworld/valid_unseen@v1")
    p.add_argument("--eval-episodes", type=int, default=None)
    p.add_argument("--eval-temperature", type=float, default=0.4)
    p.add_argument("--out", default="runs/learning")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    base = warm_start(args)
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for preset in args.presets.split(","):
            runs.append(train_and_eval(base, preset, seed, args))
            print(f"{preset} seed {seed}: curve {runs[-1]['curve']} eval All "
                  f"{runs[-1]['table']['success_pct']['All']} ({runs[-1]['train_s']:.0f}s)", flush=True)
    print("\nunseen-panel success % (mean +- std over seeds; no skills at evaluation)")
    print(report(runs))
    with open(os.path.join(args.out, "learning.json"), "w") as f:
        json.dump({"args": vars(args), "base": base, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
