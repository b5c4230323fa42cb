"""Compute dtype speed: float32 against bfloat16 for the three things a learning study spends its time on,
side by side in one process (rounds interleaved: dtype A, B, then again), so the ratios hold on a noisy machine.

Why: issue 13 asks for the whole learning study (warm start included) in <= 2 h on 2 cores. Every piece of it
is the tiny model's forward (and backward) over ALFWorld prompts of ~500 tokens, which bf16 matmuls in hardware
(AVX512-BF16, AMX) speed up where the CPU has them (docs/STUDIES.md's table: 0.58-0.75x on an AVX512-BF16 EPYC); on a
CPU without them, run this before choosing bf16. Measured:
- sft: `train_sft` for one epoch on the same demos (fp32 weights and AdamW; bf16 autocast), seconds and final loss;
- rl: RL iterations of a preset (the studies' sizes) from the same model and seed (learner: fp32 masters under
  autocast; sampler: bf16 weights): median iteration wall, sampling and learner seconds, training success;
- play: the first N games of a panel (`opid-eval`'s evaluate, bf16 weights): rollout seconds and wins.

    python -m bench.dtype_speed --model PATH [--dtypes float32,bfloat16] [--parts sft,rl,play] [--rounds 2]
        [--sft-tasks 20] [--rl-variant grpo] [--rl-iters 2] [--play-episodes 32] [--play-max-steps 30]
        [--env-config JSON] [--torch-threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def cpu_flags() -> list[str]:
    """The bf16-relevant CPU flags (Linux), so a result says what hardware it came from."""
    from opid_rllib.hardware import cpu_flags as all_flags

    return sorted(f for f in (all_flags() or ()) if "bf16" in f or f.startswith("amx") or f == "avx512f")


def cpu_model() -> str | None:
    """/proc/cpuinfo's "model name" (Linux). Here it read "AMD EPYC" both with and without AVX512-BF16, so the
    flags and torch's CPU capability, recorded beside it, are what tell such machines apart."""
    from opid_rllib.hardware import cpuinfo_value

    return cpuinfo_value(("model name",))


def sft_once(model: str, demos, dtype: str, args) -> dict:
    from opid_rllib.sft.train import train_sft

    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        train_sft(model, demos, out, epochs=1, lr=1e-3, batch_size=8, max_prompt_len=args.max_prompt_len, seed=0,
                  resume=False, progress_every_s=-1, log=None, dtype=dtype)
        wall = time.perf_counter() - t0
        stats = json.loads((Path(out) / "sft_stats.json").read_text())
    return {"seconds": wall, "final_eval_loss": stats["final_eval_loss"]}


def rl_once(model: str, dtype: str, args) -> dict:
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import CPU_TINY, apply_preset

    # the studies' sizes (studies/opid_vs_grpo_study.sh): 4 tasks x 4 copies, lr 3e-4, 32 step-samples per step
    sizes = dict(CPU_TINY, llm_model=model, max_steps=args.max_steps, tasks_per_iter=4, group_size=4,
                 history_length=args.history_length, max_prompt_len=args.max_prompt_len, max_new_tokens=48, lr=3e-4,
                 minibatch_size=32, dtype=dtype)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = OPIDConfig().environment("alfworld", env_config={**args.env_config, "split": "train",
                                                                "max_steps": args.max_steps})
        cfg = apply_preset(cfg, args.rl_variant, **sizes).debugging(seed=0)
        algo = cfg.analyzer_settings(run_dir=run_dir).build_algo()
        iters = []
        try:
            for _ in range(int(args.rl_iters)):
                t0 = time.perf_counter()
                r = algo.train()
                iters.append({"wall_s": time.perf_counter() - t0,
                              "sample_s": float(r["env_runners"]["opid_runner"]["sample_wall_s"]),
                              "train_success": float(r["opid"]["success_rate"])})
        finally:
            algo.stop()
    walls = [i["wall_s"] for i in iters]
    return {"seconds": statistics.median(walls), "iterations": iters,
            "learner_s": statistics.median(i["wall_s"] - i["sample_s"] for i in iters)}


def play_once(model: str, dtype: str, args) -> dict:
    from opid_rllib.eval.panel import evaluate

    res = evaluate(None, panel=args.panel, episodes=args.play_episodes, seed=0, batch_envs=16, progress=False,
                   temperature=0.4, llm_model=model, history_length=args.history_length,
                   max_steps=args.play_max_steps, max_new_tokens=48, max_prompt_len=args.max_prompt_len, dtype=dtype,
                   env_kwargs=args.env_config or None)
    return {"seconds": res["timing"]["rollout_s"], "won": res["counts"]["won"], "steps": res["counts"]["steps"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a local model folder (e.g. a warm-started base) or tiny")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="the first is the ratios' reference")
    ap.add_argument("--parts", default="sft,rl,play")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sft-tasks", type=int, default=20, help="sweep-demonstrator games cloned for one epoch")
    ap.add_argument("--rl-variant", default="grpo", help="a preset (opid_rllib/presets.py)")
    ap.add_argument("--rl-iters", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=15, help="training episode cap (the studies' 15)")
    ap.add_argument("--panel", default="alfworld/valid_unseen@v1")
    ap.add_argument("--play-episodes", type=int, default=32)
    ap.add_argument("--play-max-steps", type=int, default=30, help="episode cap in play (the panel's 30)")
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--max-prompt-len", type=int, default=1024)
    ap.add_argument("--env-config", default='{"expert": "sweep"}', help="ALFWorld settings (JSON)")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from opid_rllib.cli import json_object_arg

    try:
        args.env_config = json_object_arg("--env-config", args.env_config)
    except ValueError as e:
        ap.error(str(e))
    dtypes = args.dtypes.split(",")
    parts = args.parts.split(",")
    from opid_rllib.settings import SFT_DTYPE_NAMES

    bad = [d for d in dtypes if d not in SFT_DTYPE_NAMES] + [p for p in parts if p not in ("sft", "rl", "play")]
    if bad:
        ap.error(f"unknown {bad}: --dtypes takes {','.join(SFT_DTYPE_NAMES)} and --parts sft,rl,play")
    import torch

    from opid_rllib.models import resolve_model

    torch.set_num_threads(int(args.torch_threads))
    args.model = str(resolve_model(args.model))  # "tiny" -> its folder, built offline
    demos = None
    if "sft" in parts:
        from opid_rllib.sft.demos import collect_demonstrations

        demos = collect_demonstrations("alfworld", split="train", num_tasks=args.sft_tasks, history_length=2,
                                       max_steps=30, seed=0, skill_fraction=0.5, step_skill_wording="analyzer",
                                       response_style="action", demonstrator="sweep", env_kwargs=args.env_config)
    run = {"sft": lambda d: sft_once(args.model, demos, d, args), "rl": lambda d: rl_once(args.model, d, args),
           "play": lambda d: play_once(args.model, d, args)}
    recs: dict[str, dict[str, list[dict]]] = {p: {d: [] for d in dtypes} for p in parts}
    for rnd in range(int(args.rounds)):
        for part in parts:
            for d in dtypes:
                rec = run[part](d)
                recs[part][d].append(rec)
                extra = {k: v for k, v in rec.items() if k not in ("seconds", "iterations")}
                print(f"[dtype_speed] round {rnd} {part} {d}: {rec['seconds']:.1f}s {extra}", flush=True)
    print(f"\nthreads={args.torch_threads} cpu: {cpu_model()} ({torch.backends.cpu.get_cpu_capability()}); "
          f"bf16 flags: {' '.join(cpu_flags()) or 'none'}")
    print(f"{'part':<6} {'dtype':<10} {'median s':>9} {'ratio':>6}")
    rows = []
    for part in parts:
        ref = statistics.median(r["seconds"] for r in recs[part][dtypes[0]])
        for d in dtypes:
            med = statistics.median(r["seconds"] for r in recs[part][d])
            rows.append({"part": part, "dtype": d, "median_s": med, "ratio_to_first": med / ref,
                         "runs": recs[part][d]})
            print(f"{part:<6} {d:<10} {med:>9.1f} {med / ref:>6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": "python -m bench.dtype_speed " + " ".join(sys.argv[1:] if argv is None else argv),
            "cpu_flags": cpu_flags(), "cpu_model": cpu_model(), "torch_cpu_capability":
            torch.backends.cpu.get_cpu_capability(), "threads": args.torch_threads, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
