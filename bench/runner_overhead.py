"""Runner overhead: generated tokens/s of GroupedTextEnvRunner vs a plain `model.generate` loop.

    python -m bench.runner_overhead [--env alfworld] [--repeats 3]

The plain loop replays exactly the prompts the runner built (same batch sizes, same sampling
settings, same max_new_tokens) with nothing but tokenised prompts -> `model.generate`; the runner
additionally keeps per-token log-probs, builds prompts, projects actions, steps the envs and
records episodes. Overhead ratio =
plain tokens/s / runner tokens/s (goal <= 1.15). Medians over repeats, measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


@torch.no_grad()
def plain_generate(module, prompt_ids, temperature, max_new_tokens) -> int:
    """The baseline: left-pad, `model.generate`, count tokens up to EOS. Nothing else."""
    tok = module.tokenizer
    width = max(len(x) for x in prompt_ids)
    pad = module.pad_id
    ids = torch.tensor([[pad] * (width - len(x)) + list(x) for x in prompt_ids])
    attn = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in prompt_ids])
    out = module.model.generate(input_ids=ids, attention_mask=attn, do_sample=True, temperature=temperature,
                                top_k=0, max_new_tokens=max_new_tokens, pad_token_id=pad,
                                eos_token_id=tok.eos_token_id)[:, width:]
    n = 0
    for row in out.tolist():
        n += next((i + 1 for i, t in enumerate(row) if t == tok.eos_token_id), len(row))
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="alfworld")
    p.add_argument("--model", default="tiny")
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)

    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.env_runner import GroupedTextEnvRunner
    from opid_rllib.presets import CPU_TINY, apply_preset

    cfg = OPIDConfig().environment(args.env, env_config={"split": "train", "max_steps": args.max_steps})
    cfg = apply_preset(cfg, "grpo", **dict(CPU_TINY, llm_model=args.model, max_steps=args.max_steps,
                                            max_new_tokens=args.max_new_tokens)).debugging(seed=0)
    runner = GroupedTextEnvRunner(config=cfg)
    module = runner.module
    ids = list(runner._make_env(0).task_ids()[: args.tasks])
    g = args.group_size
    runner.sample_groups(ids, group_size=g, seed=0)  # warm-up (game caches, first-call overheads)

    runner_tps, plain_tps = [], []
    for rep in range(args.repeats):
        t0 = time.perf_counter()
        eps = runner.sample_groups(ids, group_size=g, seed=100 + rep)
        wall = time.perf_counter() - t0
        n_tok = sum(int(x) for e in eps for x in e.get_extra_model_outputs("response_len"))
        runner_tps.append(n_tok / wall)
        # Replay the same prompts, step by step, batched as the runner batched them (live envs per step).
        steps: dict[int, list[str]] = {}
        for e in eps:
            for t, prompt in enumerate(e.get_extra_model_outputs("prompt")):
                steps.setdefault(t, []).append(str(prompt))
        batches = [module.encode_prompts(steps[t])[0] for t in sorted(steps)]
        t0 = time.perf_counter()
        n_plain = 0
        torch.manual_seed(100 + rep)
        for b in batches:
            n_plain += plain_generate(module, b, cfg.temperature, args.max_new_tokens)
        plain_tps.append(n_plain / (time.perf_counter() - t0))
        print(f"repeat {rep}: runner {runner_tps[-1]:.0f} tok/s, plain generate {plain_tps[-1]:.0f} tok/s", flush=True)
    r, pl = statistics.median(runner_tps), statistics.median(plain_tps)
    print(f"\nmedians over {args.repeats} repeats (env={args.env}, model={args.model}, {args.tasks} tasks x {g}, "
          f"max_steps={args.max_steps}, max_new_tokens={args.max_new_tokens}, torch threads={torch.get_num_threads()})")
    print(f"runner          {r:8.0f} generated tok/s")
    print(f"plain generate  {pl:8.0f} generated tok/s")
    print(f"overhead ratio  {pl / r:8.2f}  (plain / runner; goal <= 1.15)")
    runner.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
