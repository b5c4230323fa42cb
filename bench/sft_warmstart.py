"""SFT warm start on CPU: greedy success of the tiny policy before vs after behaviour cloning.

Why: OPID's tiny-model runs start from random weights, so every GRPO group would score 0 and give
no signal. This bench builds the tiny model (or takes --model), clones the expert on train tasks
(opid_rllib/sft/), then plays held-out tasks greedily through the training env runner
(opid_rllib/sft/greedy.py, opid-eval's path) for the model before and after SFT, and prints success, format validity
and agreement with the env expert. Per-env sizes (ENV_DEFAULTS) aim at ~15 min on 2 cores; the training phase has a
time budget.

    python -m bench.sft_warmstart [--env auto|alfworld|webshop|searchqa] [--model tiny|PATH]
        [--train-tasks N] [--eval-tasks N] [--epochs E] [--budget-s S] [--json out.json]

--env auto uses ALFWorld when its env lists tasks, else searchqa. Measured on a shared 2-core box
(2026-11-22, torch 1 thread): greedy held-out success stays 0 after these budgets, while format
validity goes 0 -> 1.0 (ALFWorld, 120 tasks, 736 steps, 437 s) / 0 -> 0.8 (searchqa, 1200 tasks,
711 steps, 648 s); the 3M model has learned the format and action priors, not yet to copy names.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# Per-env defaults: (train split, held-out split, max_steps, max_new_tokens, max_prompt_len, train tasks,
# epochs, held-out eval tasks, training budget s). ALFWorld episodes are long (~12 expert steps,
# 30-step cap), so it trains on fewer tasks and evaluates fewer episodes to stay near 15 minutes.
ENV_DEFAULTS = {
    "alfworld": ("train", "valid_unseen", 30, 48, 1024, 120, 2, 8, 480.0),
    "webshop": ("train", "test", 8, 64, 1024, 150, 2, 20, 600.0),
    "searchqa": ("train", "test", 4, 64, 1024, 1200, 1, 20, 660.0),
}


def pick_env(name: str) -> str:
    import envs

    if name != "auto":
        return envs.env_name_of(name)
    try:
        if len(envs.make("alfworld").task_ids()) > 0:
            return "alfworld"
        print("[bench] alfworld env lists no tasks yet; using searchqa", flush=True)
    except Exception as e:  # noqa: BLE001 - env under construction: fall back
        print(f"[bench] alfworld env not usable ({type(e).__name__}: {str(e)[:120]}); using searchqa", flush=True)
    return "searchqa"


def held_out_ids(env_name: str, split: str, n: int) -> list[str]:
    """First n ids of the env's evaluation panel (fixed, versioned) or of the held-out split."""
    from envs.panels import get_panel

    panel = {"alfworld": "alfworld/valid_unseen@v1", "webshop": "webshop/test@v1",
             "searchqa": "searchqa/test@v1"}[env_name]
    try:
        ids = list(get_panel(panel).task_ids)
    except Exception:  # noqa: BLE001
        import envs

        ids = list(envs.make(env_name, split=split).task_ids())
    return ids[:n]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="auto")
    ap.add_argument("--model", default="tiny", help="policy to warm-start (default: the untrained tiny model); "
                    "a previous SFT folder continues training")
    ap.add_argument("--train-tasks", type=int, default=None)
    ap.add_argument("--eval-tasks", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--history-length", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--max-prompt-len", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--skill-fraction", type=float, default=0.3)
    ap.add_argument("--step-skill-wording", choices=("plain", "analyzer"), default="plain")
    ap.add_argument("--deviation-prob", type=float, default=0.0)
    ap.add_argument("--response-style", choices=("reasoned", "action"), default="reasoned")
    ap.add_argument("--hint-follow-prob", type=float, default=0.0)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="training time budget in s (per-env default; 0: no budget, every epoch runs, "
                         "so the model does not depend on the machine's speed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch.set_num_threads (default 1: on a busy 2-core box 1 thread was 2x faster than 2)")
    ap.add_argument("--out", default=None, help="SFT model folder (default: a temp dir)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("OPID_CACHE_DIR", "/tmp/opid_cache")
    if args.torch_threads:
        import torch

        torch.set_num_threads(int(args.torch_threads))

    from opid_rllib.models import resolve_model
    from opid_rllib.sft.demos import collect_demonstrations
    from opid_rllib.sft.greedy import evaluate_greedy
    from opid_rllib.sft.train import train_sft

    t_all = time.perf_counter()
    env_name = pick_env(args.env)
    train_split, eval_split, d_steps, d_new, d_plen, d_train, d_epochs, d_eval, d_budget = ENV_DEFAULTS[env_name]
    epochs = args.epochs or d_epochs
    max_steps = args.max_steps or d_steps
    max_new = args.max_new_tokens or d_new
    max_plen = args.max_prompt_len or d_plen
    n_train = args.train_tasks or d_train
    n_eval = args.eval_tasks or d_eval
    budget = d_budget if args.budget_s is None else (args.budget_s or None)
    base = resolve_model(args.model)
    print(f"[bench] env={env_name} base={base} threads={__import__('torch').get_num_threads()}", flush=True)

    t0 = time.perf_counter()
    cstats: dict = {}
    demos = collect_demonstrations(env_name, split=train_split, num_tasks=n_train, history_length=args.history_length,
                                   max_steps=max_steps, seed=args.seed, skill_fraction=args.skill_fraction,
                                   stats=cstats, step_skill_wording=args.step_skill_wording,
                                   deviation_prob=args.deviation_prob, response_style=args.response_style,
                                   hint_follow_prob=args.hint_follow_prob)
    collect_s = time.perf_counter() - t0
    print(f"[bench] demos: {cstats} in {collect_s:.1f}s", flush=True)
    if not demos:
        print(f"[bench] the expert won no episode within --max-steps {max_steps}; nothing to clone", file=sys.stderr)
        return 2

    eval_ids = held_out_ids(env_name, eval_split, n_eval)
    train_eval_ids = sorted({d.task_id for d in demos})[: max(1, n_eval // 2)]
    ev = dict(history_length=args.history_length, max_steps=max_steps, max_prompt_len=max_plen,
              max_new_tokens=max_new)
    res = {}
    res["before/held-out"] = evaluate_greedy(base, env_name, eval_ids, split=eval_split, **ev)
    print(f"[bench] before SFT, held-out: {res['before/held-out']['success_rate']:.3f} "
          f"({res['before/held-out']['seconds']:.0f}s)", flush=True)

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="opid-sft-bench-"))
    t0 = time.perf_counter()
    train_sft(base, demos, out, epochs=epochs, lr=args.lr, batch_size=args.batch_size, max_prompt_len=max_plen,
              seed=args.seed, log_every=10, time_budget_s=budget)
    train_s = time.perf_counter() - t0
    stats = json.loads((out / "sft_stats.json").read_text())

    res["sft/held-out"] = evaluate_greedy(out, env_name, eval_ids, split=eval_split, **ev)
    res["sft/train-tasks"] = evaluate_greedy(out, env_name, train_eval_ids, split=train_split, **ev)

    print()
    print(f"SFT warm start, env={env_name}: {cstats['episodes_won']} expert episodes, {len(demos)} demos, "
          f"{stats['tokens']} tokens ({stats['response_tokens']} response), {stats['optimizer_steps']} steps, "
          f"train {train_s:.0f}s{' (time budget hit)' if stats['stopped_early'] else ''}")
    print("loss per epoch: " + ", ".join(f"{c['loss']:.3f}" for c in stats["loss_curve"]))
    print(f"before = {args.model}")
    print(f"{'policy / tasks':<22} {'episodes':>8} {'success':>8} {'fmt valid':>9} {'= expert':>9} {'steps':>6} "
          f"{'eval s':>7}")
    for k, r in res.items():
        print(f"{k:<22} {r['episodes']:>8} {r['success_rate']:>8.3f} {r['format_valid_rate']:>9.3f} "
              f"{r.get('expert_agreement', float('nan')):>9.3f} {r['mean_steps']:>6.2f} {r['seconds']:>7.0f}")
    total = time.perf_counter() - t_all
    print(f"total wall time {total:.0f}s")
    if args.json:
        summary = {"env": env_name, "collect": cstats, "collect_s": collect_s, "sft": stats, "train_s": train_s,
                   "eval": {k: {kk: vv for kk, vv in r.items() if kk != "won"} for k, r in res.items()},
                   "total_s": total, "args": vars(args)}
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
