"""Where an OPID iteration's time goes, how fast the learner trains, and how iteration time scales.

    python -m bench.throughput [--env alfworld] [--json PATH]

Three tables, all measured in one process on the same machine state:

1. Per-phase breakdown of one OPID iteration vs one GRPO iteration (rollout, analyzer wait,
   re-score, learner update, weight sync). Both algorithms are built once, one warm-up
   iteration each, then `--iters` measured iterations alternating GRPO, OPID, ...; medians.
   Row names and the old log-probs / re-score figures come from `phases()` in
   bench/opid_vs_grpo_speed.py; rollout, generate, analysis wait, update and weight sync are
   wall-clock probes around the calls `OPID.training_step` makes, because RLlib's result
   TIMERS are EMA-smoothed and would mostly report the warm-up iteration (see `instrument`).
2. Training tokens/s of the real learner update (`OPIDTorchLearner._uncompiled_update` on the
   batch the learner connector pipeline builds from freshly sampled episodes) vs a plain
   PyTorch loop doing the same work on the same tensors: same model class and a copy of the
   weights, same length-sorted micro-batches, `response_logprobs` forward (with entropy), KL
   reference forward (no grad, included in both), `ppo_token_loss`, backward, global-norm grad
   clip, AdamW step. No RLlib in the plain loop. A third row runs the plain loop on micro-batches
   cut in batch order, which shows what the length sort saves. Tokens = prompt + response tokens (non-pad) of the
   batch per update (the first --learner-samples rows of the pipeline batch, to bound run time).
   Overhead ratio = plain tokens/s / ours tokens/s (goal <= 1.2).
3. OPID iteration time vs group size (tasks fixed) and vs max steps: one warm-up then the
   median of `--iters` iterations per point. The base point (default group size and max steps)
   reuses table 1's OPID iterations (same config) instead of building the algorithm again.
   Points run cheapest first (both axes interleaved); a point whose estimated cost (from the base median, scaled
   by group size x max steps) would push the run past --budget-s is printed as skipped.

Default sizes (2 tasks x group 2, max_steps 3, 16 new tokens, 8 learner samples, 5 learner reps) are chosen
so the whole run fits in about 10 minutes on a loaded 2-core CPU with the tiny model.

Timings are noisy on a shared 2-core box: read ratios, not absolute seconds.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

from bench.opid_vs_grpo_speed import phases

PHASE_ROWS = {  # table-1 label -> phases() key
    "iteration (wall)": "iteration",
    "rollout": "rollout",
    "  generate": "  generate",
    "  analysis wait": "  analyzer wait",
    "learner update": "learner update",
    "  old log-probs": "  old log-probs",
    "  skill re-score": "  skill re-score",
    "weight sync": "weight sync",
}


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def build(args, preset: str, *, group_size: int | None = None, max_steps: int | None = None):
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import CPU_TINY, apply_preset

    g = group_size or args.group_size
    ms = max_steps or args.max_steps
    cfg = OPIDConfig().environment(args.env, env_config={"split": "train", "max_steps": ms})
    cfg = apply_preset(cfg, "opid", **dict(CPU_TINY, llm_model=args.model, max_steps=ms,
                                             tasks_per_iter=args.tasks_per_iter, group_size=g,
                                             max_new_tokens=args.max_new_tokens))
    return apply_preset(cfg, preset).debugging(seed=0).build_algo()


def instrument(algo) -> dict:
    """Per-iteration wall-clock probes on this algo instance.

    RLlib's TIMERS in the result dict are EMA-smoothed (log_time's default ema_coeff=0.01), so
    `phases(result)` mostly reports the warm-up iteration's rollout / update / sync times, and the
    runner's generate / analyzer-wait sums are not per-iteration either. We time the same calls
    `OPID.training_step` makes (and read the runner's own per-call timers dict) instead; the
    learner connector timers (old log-probs, re-score) are logged with window=1 and are taken
    from `phases()` as is.
    """
    probe: dict[str, float] = {}

    def wrap(obj, name, key):
        orig = getattr(obj, name)

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return orig(*a, **kw)
            finally:
                probe[key] = probe.get(key, 0.0) + time.perf_counter() - t0

        setattr(obj, name, timed)

    wrap(algo, "_sample", "rollout")
    wrap(algo.learner_group, "update", "learner update")
    wrap(algo.env_runner_group, "sync_weights", "weight sync")
    runner = algo.env_runner_group.local_env_runner
    orig_log = runner._log_sample_metrics

    def log_sample_metrics(episodes, timers, counts, wall):
        probe["  generate"] = probe.get("  generate", 0.0) + timers["generate_s"]
        probe["  analyzer wait"] = probe.get("  analyzer wait", 0.0) + timers["analyzer_wait_s"]
        probe["steps"] = probe.get("steps", 0.0) + counts["steps"]
        return orig_log(episodes, timers, counts, wall)

    runner._log_sample_metrics = log_sample_metrics
    algo._throughput_probe = probe
    return probe


def timed_train(algo) -> dict:
    probe = getattr(algo, "_throughput_probe", None)
    if probe is None:
        probe = instrument(algo)
    probe.clear()
    t0 = time.perf_counter()
    res = algo.train()
    wall = time.perf_counter() - t0
    ph = phases(res)
    ph.update(probe)
    ph["iteration"] = wall
    return ph


# ---- table 1 ---------------------------------------------------------------------------
def table_phases(args, algos) -> dict:
    rows: dict[str, list[dict]] = {k: [] for k in algos}
    for it in range(args.iters + 1):
        for name, algo in algos.items():
            ph = timed_train(algo)
            if it > 0:
                rows[name].append(ph)
            print(f"  [t1] iter {it}{' (warm-up)' if it == 0 else ''} {name}: {ph['iteration']:.1f}s", flush=True)
    meds = {name: {k: med(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    print(f"\nTable 1: per-phase seconds, one iteration, median of {args.iters} after 1 warm-up "
          f"(env={args.env}, {args.tasks_per_iter} tasks x {args.group_size}, max_steps={args.max_steps})")
    print(f"{'phase':<20}{'GRPO s':>10}{'OPID s':>10}{'OPID/GRPO':>11}")
    for label, key in PHASE_ROWS.items():
        g, o = meds["grpo"][key], meds["opid"][key]
        ratio = f"{o / g:.2f}" if g == g and g > 1e-3 else "-"
        print(f"{label:<20}{g:>10.2f}{o:>10.2f}{ratio:>11}")
    g, o = meds["grpo"].get("steps", float("nan")), meds["opid"].get("steps", float("nan"))
    print(f"{'env steps (count)':<20}{g:>10.0f}{o:>10.0f}{o / g if g else float('nan'):>11.2f}")
    return {"rows": rows, "medians": meds}


# ---- table 2 ---------------------------------------------------------------------------
def learner_batch(algo, seed: int = 123):
    """Sample episodes with the algo's own runner and run the learner connector pipeline on them."""
    from opid_rllib.algorithm import learner_connectors

    cfg = algo.config
    learner = algo.learner_group._learner
    runner = algo.env_runner_group.local_env_runner
    tasks = algo._train_task_ids[: cfg.tasks_per_iter]
    episodes = runner.sample_groups(tasks, seed=seed)
    batch, shared = {}, {}
    for piece in learner_connectors(cfg):
        batch = piece(rl_module=learner.module, batch=batch, episodes=episodes, shared_data=shared, metrics=None)
    return batch["default_policy"]


def plain_update(model, ref_model, opt, data, *, mb, temperature, loss_kw, grad_clip, sort=True):
    """The learner's work with plain torch: micro-batched token-mean PPO + KL ref + AdamW.

    sort=True cuts micro-batches from length-sorted rows as the learner does; sort=False takes
    rows in batch order (what the learner did before), to show what the sort saves."""
    import torch

    from opid_rllib.losses import ppo_token_loss
    from opid_rllib.token_logprobs import length_order, response_logprobs

    n = int(data["response_ids"].shape[0])
    n_tok = data["response_mask"].sum().clamp(min=1.0)
    order = length_order(data["prompt_len"], data["response_len"]) if sort else torch.arange(n)
    opt.zero_grad(set_to_none=True)
    for s in range(0, n, mb):
        sub = {k: v[order[s:s + mb]] for k, v in data.items()}
        logp, ent = response_logprobs(model, sub["prompt_ids"], sub["prompt_len"], sub["response_ids"],
                                      sub["response_len"], temperature=temperature, with_entropy=True)
        ref_logp = None
        if ref_model is not None:
            with torch.no_grad():
                ref_logp, _ = response_logprobs(ref_model, sub["prompt_ids"], sub["prompt_len"],
                                                sub["response_ids"], sub["response_len"], temperature=temperature)
        loss_sum, _ = ppo_token_loss(logp, sub["old_logp"], sub["advantages"], sub["response_mask"],
                                     entropy=ent, ref_logp=ref_logp, **loss_kw)
        (loss_sum / n_tok).backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()


def table_learner(args, algo) -> dict:
    import torch

    from opid_rllib.connectors.samples import policy_module
    from opid_rllib.token_logprobs import length_order

    cfg = algo.config
    learner = algo.learner_group._learner
    full = learner_batch(algo)
    n_full = int(full["response_ids"].shape[0])
    k = min(n_full, args.learner_samples) if args.learner_samples else n_full
    data = {key: v[:k].contiguous() for key, v in full.items()}
    n = k
    tokens = int((data["prompt_len"] + data["response_len"]).sum())
    mb = max(1, int(cfg.micro_batch_size))

    def padded_tokens(order):  # tokens fed to the model (response_logprobs trims all-pad columns per micro-batch)
        out = 0
        for s in range(0, n, mb):
            pl, rl = data["prompt_len"][order[s:s + mb]], data["response_len"][order[s:s + mb]]
            out += len(pl) * (max(int(pl.max()), 1) + max(int(rl.max()), 1))
        return out

    padded = padded_tokens(length_order(data["prompt_len"], data["response_len"]))
    padded_unsorted = padded_tokens(torch.arange(n))
    ours_model = policy_module(learner.module).model
    model = copy.deepcopy(ours_model)
    model.train(ours_model.training)
    ref = copy.deepcopy(learner._ref_model) if learner._ref_model is not None else None
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    loss_kw = dict(clip_low=cfg.clip_ratio_low, clip_high=cfg.clip_ratio_high, dual_clip_c=cfg.dual_clip_c,
                   kl_coeff=cfg.kl_coeff, entropy_coeff=cfg.entropy_coeff, opsd_coeff=cfg.opsd_loss_coeff)
    temperature = cfg.model_config.get("temperature", 1.0)

    def run_ours():
        learner._uncompiled_update({"default_policy": data})

    def plain(sort):
        return lambda: plain_update(model, ref, opt, data, mb=mb, temperature=temperature, loss_kw=loss_kw,
                                    grad_clip=cfg.grad_clip if cfg.grad_clip_by == "global_norm" else None, sort=sort)

    runs = {"ours": run_ours, "plain": plain(True), "plain_unsorted": plain(False)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for rep in range(args.learner_reps + 1):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if rep > 0:
                times[name].append(dt)
            print(f"  [t2] rep {rep}{' (warm-up)' if rep == 0 else ''} {name}: {dt:.2f}s", flush=True)
    m = {k: med(v) for k, v in times.items()}
    tps = {k: tokens / v for k, v in m.items()}
    ratio = tps["plain"] / tps["ours"]
    print(f"\nTable 2: learner update throughput on the pipeline's batch (first {n} of {n_full} samples, "
          f"{tokens} prompt+response tokens, {padded} incl. padding in length-sorted micro-batches, "
          f"{padded_unsorted} in batch order; "
          f"micro_batch_size={mb}; KL reference forward included in all; "
          f"median of {args.learner_reps} after 1 warm-up, alternating)")
    best = {k: min(v) for k, v in times.items()}
    print(f"{'update':<48}{'s/update':>10}{'tokens/s':>11}{'min s':>9}{'tok/s@min':>11}")
    for key, label in (("ours", "ours (Learner._uncompiled_update)"),
                       ("plain", "plain PyTorch loop, same sorted micro-batches"),
                       ("plain_unsorted", "plain PyTorch loop, batch-order micro-batches")):
        print(f"{label:<48}{m[key]:>10.3f}{tps[key]:>11.0f}{best[key]:>9.3f}{tokens / best[key]:>11.0f}")
    print(f"overhead ratio plain/ours (tokens/s) = {ratio:.3f} median, {best['ours'] / best['plain']:.3f} "
          f"best-of  (goal <= 1.2); length sort saves {m['plain_unsorted'] / m['plain']:.2f}x")
    return {"samples": n, "samples_in_batch": n_full, "tokens": tokens, "padded_tokens": padded,
            "padded_tokens_unsorted": padded_unsorted, "micro_batch_size": mb,
            "times": times, "median_s": m, "min_s": best, "tokens_per_s": tps, "overhead_ratio": ratio,
            "overhead_ratio_best": best["ours"] / best["plain"]}


# ---- table 3 ---------------------------------------------------------------------------
def table_scaling(args, base_rows: list[dict], t_start: float) -> dict:
    base_iters = [r["iteration"] for r in base_rows]
    args_t1 = bool(base_rows)
    points = [("group_size", g, dict(group_size=g)) for g in args.group_sizes] + \
             [("max_steps", s, dict(max_steps=s)) for s in args.max_steps_list]
    # Cheapest points first (group size x max steps relative to the base), so both axes get their
    # second point before either gets its third when the time budget runs short.
    points.sort(key=lambda pt: pt[2].get("group_size", args.group_size) * pt[2].get("max_steps", args.max_steps))
    out = []
    for axis, value, kw in points:
        is_base = kw.get("group_size", args.group_size) == args.group_size and \
            kw.get("max_steps", args.max_steps) == args.max_steps
        base_med = med(base_iters) if base_iters else float("nan")
        ratio = kw.get("group_size", args.group_size) / args.group_size * kw.get("max_steps", args.max_steps) \
            / args.max_steps
        estimate = (args.iters + 1) * base_med * max(ratio, 0.5) + 10.0
        if not is_base and base_med == base_med and time.perf_counter() - t_start + estimate > args.budget_s:
            print(f"  [t3] {axis}={value}: SKIPPED (est. {estimate:.0f}s would exceed --budget-s {args.budget_s:.0f})",
                  flush=True)
            out.append({"axis": axis, "value": value, "iters_s": [], "median_s": float("nan"), "skipped": True})
            continue
        if is_base and base_iters:
            its, steps = list(base_iters), [r.get("steps", float("nan")) for r in base_rows]
            print(f"  [t3] {axis}={value}: base point, reusing {'table 1 OPID' if args_t1 else 'the measured base'} "
                  f"iterations", flush=True)
        else:
            algo = build(args, "opid", **kw)
            its, steps = [], []
            for it in range(args.iters + 1):
                ph = timed_train(algo)
                if it > 0:
                    its.append(ph["iteration"])
                    steps.append(ph.get("steps", float("nan")))
                print(f"  [t3] {axis}={value} iter {it}{' (warm-up)' if it == 0 else ''}: "
                      f"{ph['iteration']:.1f}s, {ph.get('steps', 0):.0f} env steps", flush=True)
            algo.stop()
            if is_base:  # measured once (no table 1 in this run): the other axis reuses it
                base_rows = [{"iteration": t, "steps": n} for t, n in zip(its, steps)]
                base_iters = list(its)
        out.append({"axis": axis, "value": value, "iters_s": its, "median_s": med(its), "steps": steps,
                    "median_steps": med(steps), "median_s_per_step": med([t / n for t, n in zip(its, steps) if n])})
    print(f"\nTable 3: OPID iteration seconds, median of {args.iters} after 1 warm-up "
          f"({args.tasks_per_iter} tasks; group_size={args.group_size} / max_steps={args.max_steps} when not varied)")
    for axis in ("group_size", "max_steps"):
        rows = sorted((r for r in out if r["axis"] == axis), key=lambda r: r["value"])
        first = next((r["median_s"] for r in rows if r["median_s"] == r["median_s"]), float("nan"))
        print(f"{axis:<12}{'iter s':>10}{'x first':>10}{'x value':>10}{'env steps':>11}{'s/step':>9}")
        for r in rows:
            if r.get("skipped"):
                print(f"{r['value']:<12}{'skipped (time budget)':>30}")
                continue
            print(f"{r['value']:<12}{r['median_s']:>10.2f}{r['median_s'] / first:>10.2f}"
                  f"{r['value'] / rows[0]['value']:>10.2f}{r['median_steps']:>11.0f}{r['median_s_per_step']:>9.2f}")
    return {"points": out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="alfworld")
    p.add_argument("--model", default="tiny")
    p.add_argument("--iters", type=int, default=2, help="measured iterations per algorithm / point (after 1 warm-up)")
    p.add_argument("--tasks-per-iter", type=int, default=2)
    p.add_argument("--group-size", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--learner-reps", type=int, default=5, help="measured updates each, table 2")
    p.add_argument("--learner-samples", type=int, default=8,
                   help="table 2 trains on the first N samples of the pipeline batch (0: all)")
    p.add_argument("--budget-s", type=float, default=600.0,
                   help="table 3 skips a point whose estimated cost would push the run past this")
    p.add_argument("--group-sizes", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--max-steps-list", type=int, nargs="+", default=[3, 6, 12])
    p.add_argument("--tables", default="123", help="which tables to run, e.g. 12")
    p.add_argument("--json", default=None, help="also write the raw figures here")
    args = p.parse_args(argv)

    t_start = time.perf_counter()
    report: dict = {"args": vars(args)}
    base_rows: list[dict] = []
    algos = {}
    if "1" in args.tables:
        algos = {"grpo": build(args, "grpo"), "opid": build(args, "opid")}
    elif "2" in args.tables:
        algos = {"opid": build(args, "opid")}
    if "1" in args.tables:
        report["phases"] = table_phases(args, algos)
        base_rows = report["phases"]["rows"]["opid"]
    if "2" in args.tables:
        report["learner"] = table_learner(args, algos["opid"])
    for a in algos.values():
        a.stop()
    if "3" in args.tables:
        report["scaling"] = table_scaling(args, base_rows, t_start)
    report["total_s"] = time.perf_counter() - t_start
    print(f"\ntotal wall time {report['total_s']:.0f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
