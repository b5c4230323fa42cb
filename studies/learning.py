"""Learning benchmark: GRPO vs OPID (and ablations) from one warm-started base, several seeds.

    python -m studies.learning --out runs/learning            # defaults: grpo,opid x seeds 0,1,2

`--base tiny` warm-starts the tiny model with opid-sft first (one SFT shared by every run, cached in
--out/sft_base); `--base PATH` takes an existing HF folder (an SFT'd model, smollm2-135m, ...).
Every (variant, seed) run trains with the same budget (iterations x tasks x group), then its policy
plays the fixed `valid_unseen` panel with no analyzer and no skills (the deployment setting). The
base model plays the same panel once per seed, so every row can be read against the start.

Variants are presets with optional overrides: `opid`, `grpo`, `no_episode_skill`, `additive`,
`opid:w=0.1` (both skill weights 0.1), `opid:w_ep=0.01+w_step=0.1+lr=3e-4`,
`opid:w=0.1+normalize_teacher_adv=true` (any OPIDConfig setting; `+` joins overrides, `,` variants),
`opid:w_step=1+analyzer.on_plan_step_skills=3` (`analyzer.KEY` goes to analyzer_config).

Printed and written to --out: the paper-format table (Pick, Look, Clean, Heat, Cool, Pick2, Avg, All)
as mean +- std over seeds, paired OPID-minus-GRPO differences per seed, training success vs iteration,
the Delta log-prob statistics (does the base react to skills at all, and how big is the teacher term
next to the outcome advantage), `learning.json` and `learning.png` (curves + unseen bars). Each
finished run is saved to --out/runs/ first, so an interrupted benchmark resumes where it stopped (a training job
cut short resumes at its next iteration from the checkpoint in its run folder, studies/job_checkpoint.py, and a play
at its next chunk of games, opid-eval --resume), and
`--shard 0/2` + `--shard 1/2` in two processes (1 torch thread each) share the runs, each taking the next one
the other has not claimed; a last call without --shard then only reads the cache and prints the report.
One job's training and play (what a study caches) lie in studies/study_job.py; the report's text and plot in
studies/learning_report.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from studies.learning_report import delta_text, paired_text, plot, run_seconds, summary, table_text
from studies.run_cache import cached, check_base, check_dtype, check_settings, claim, release
# One job (train + play, the base's plays): called by name from main(), so a test replaces them here.
from studies.study_job import (PLAY_CHUNKS, base_headroom, evaluate_policy, parse_variant, run_dir_of,
                       train_and_eval)

from opid_rllib.settings import SFT_DTYPE_NAMES  # the warm start's dtypes bound the study's
from opid_rllib.cli import json_object_arg
from opid_rllib.models.fingerprint import weights_fingerprint

# The arguments a cached run does not depend on: which jobs this call runs, how they share processes and threads,
# and where and under which names the report goes. Every other argument is checked against OUT/settings.json.
# --base is checked by content instead (base_weights): a study resumed on a fresh machine names a rebuilt warm
# start, wherever it lies, and goes on only where its weights are the ones the folder's runs started from.
NOT_RUN_SETTINGS = ("variants", "seeds", "shard", "torch_threads", "out", "results", "opid_variant",
                    "shuffled_variant", "headroom_panel", "headroom_results", "base", "cached_only")


def warm_start(args) -> str:
    if args.base != "tiny":
        return args.base
    from opid_rllib.models import resolve_model
    from opid_rllib.sft.demos import collect_demonstrations
    from opid_rllib.sft.train import train_sft

    out = os.path.join(args.out, "sft_base")
    if os.path.exists(os.path.join(out, "config.json")):
        print(f"[learning] reusing warm start {out}", flush=True)
        return out
    if args.cached_only:  # trains nothing, the warm start included
        return out
    t0 = time.time()
    demos = collect_demonstrations("alfworld", split="train", num_tasks=args.sft_tasks,
                                   history_length=args.history_length, max_steps=30, seed=0,
                                   skill_fraction=args.sft_skill_fraction,
                                   step_skill_wording=args.sft_step_skill_wording,
                                   deviation_prob=args.sft_deviation_prob, response_style=args.sft_response_style,
                                   hint_follow_prob=args.sft_hint_follow_prob)
    train_sft(resolve_model("tiny"), demos, out, epochs=args.sft_epochs, lr=3e-3, batch_size=4,
              max_prompt_len=args.max_prompt_len, seed=0, time_budget_s=args.sft_budget_s or None, log_every=200,
              dtype=args.dtype)
    print(f"[learning] warm start: {len(demos)} demos, {time.time() - t0:.0f}s", flush=True)
    return out


def zero_signal_fraction(run_dir: str) -> float | None:
    """Share of rollout groups whose copies all won or all lost: GRPO's outcome advantage is exactly 0
    there, so only OPID's skill term can move those samples. Read from the run's skill dumps."""
    import glob

    same = total = 0
    for path in glob.glob(os.path.join(run_dir, "opid_skills", "iter_*.jsonl")):
        groups: dict[str, set] = {}
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                groups.setdefault(rec["traj_id"].rsplit("/", 1)[0], set()).add(bool(rec["won"]))
        same += sum(len(w) == 1 for w in groups.values())
        total += len(groups)
    return same / total if total else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="tiny")
    p.add_argument("--variants", "--presets", dest="variants", default="grpo,opid",
                   help="comma-separated arms (parse_variant); empty: play the base alone on --seeds")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--tasks-per-iter", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=20, help="training episode cap (expert needs ~12 on average)")
    p.add_argument("--eval-max-steps", type=int, default=30)
    p.add_argument("--history-length", type=int, default=2)
    p.add_argument("--max-prompt-len", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=48, help="the SFT'd tiny model answers in ~28 tokens")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--micro-batch-size", type=int, default=None,
                   help="rows per forward/backward in the learner (default CPU_TINY's): the same gradient in less "
                        "memory (a SmolLM2 learner at 16 outgrew 24 GB)")
    p.add_argument("--minibatch-size", type=int, default=None,
                   help="step-samples per optimizer step, every arm (default: one step per iteration)")
    p.add_argument("--sft-tasks", type=int, default=330)
    p.add_argument("--sft-epochs", type=int, default=4, help="the warm-start recipe of scripts/quickstart.sh --full")
    p.add_argument("--sft-budget-s", type=float, default=0.0,
                   help="stop the warm start after this many seconds (0: all epochs). A budget makes the base "
                        "depend on the machine's speed, so the default runs every epoch")
    p.add_argument("--env-config", default="{}",
                   help="JSON dict of ALFWorld settings for training and panel play, e.g. '{\"expert\": \"sweep\"}': "
                        "the built-in analyzer's step skills, the oracle and agreement name the sweep's command")
    p.add_argument("--eval-panel", default="alfworld/valid_unseen@v1")
    p.add_argument("--eval-episodes", type=int, default=None)
    p.add_argument("--eval-temperature", type=float, default=0.4)
    p.add_argument("--batch-envs", type=int, default=16, help="panel games played (and generated) together")
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--dtype", choices=SFT_DTYPE_NAMES, default="float32",
                   help="compute dtype of warm start, training (fp32 masters, autocast) and panel play; bfloat16 "
                        "pays off on CPUs with AVX512-BF16/AMX (bench/dtype_speed.py)")
    p.add_argument("--shard", default=None,
                   help="i/n: one of n processes sharing the jobs, each taking the next unclaimed one (no report)")
    p.add_argument("--out", default="runs/learning")
    p.add_argument("--sft-response-style", choices=("reasoned", "action"), default="reasoned",
                   help="warm start: opid-sft --response-style")
    p.add_argument("--sft-hint-follow-prob", type=float, default=0.0, help="warm start: opid-sft --hint-follow-prob")
    p.add_argument("--sft-skill-fraction", type=float, default=0.3, help="warm start: opid-sft --skill-fraction")
    p.add_argument("--sft-step-skill-wording", choices=("plain", "analyzer"), default="plain")
    p.add_argument("--sft-deviation-prob", type=float, default=0.0)
    p.add_argument("--opid-variant", default="opid", help="the variant summary.opid_minus_grpo_all is about")
    p.add_argument("--shuffled-variant", default="opid_shuffled",
                   help="the variant summary.shuffled_minus_grpo_all is about (same weights as --opid-variant)")
    p.add_argument("--headroom-panel", default=None,
                   help="also play the base on this panel with oracle skills (opid-eval --skills oracle): the "
                        "teacher diagnostics printed next to the table")
    p.add_argument("--headroom-results", default=None,
                   help="opid-eval --skills oracle results.json of the base on --headroom-panel with this run's "
                        "settings (seed 0): read instead of playing the panel again; refused where its settings "
                        "or its model's weights (config.model_weights, where recorded) differ from this run's")
    p.add_argument("--results", default=None,
                   help="also write the per-seed numbers, the command and the summary here "
                        "(e.g. studies/results/learning.json)")
    p.add_argument("--cached-only", action="store_true",
                   help="train and play nothing: report the jobs of --variants x --seeds already cached under "
                        "--out, naming the others (a study that takes several sittings, reported after each)")
    args = p.parse_args(argv)
    try:
        args.env_config = json_object_arg("--env-config", args.env_config)
    except ValueError as e:
        p.error(str(e))
    variants = [v for v in args.variants.split(",") if v]  # none: the base's plays alone
    for v in variants:
        parse_variant(v)
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    os.makedirs(args.out, exist_ok=True)
    check_dtype(args.out, args.dtype)
    check_settings(args.out, {k: v for k, v in vars(args).items() if k not in NOT_RUN_SETTINGS})
    t_start = time.time()
    base, base_weights = warm_start(args), None
    if args.cached_only and not os.path.exists(base):
        # a report re-reads finished runs: it needs no weights (SmolLM2's warm start is 538 MB and 20 min to
        # rebuild), and without them it cannot check which ones the runs started from, so it says so
        print(f"[learning] --cached-only: {base} is not here; the cached runs are reported without checking the "
              "warm start they were made from (OUT/settings.json: base_weights)", flush=True)
    else:
        base_weights = weights_fingerprint(base)
        check_base(args.out, base, base_weights)
    seeds = [int(s) for s in args.seeds.split(",")]

    def base_play(s: int) -> dict:
        table = evaluate_policy(base, s, args, chunks=os.path.join(args.out, "runs", f"base-s{s}", PLAY_CHUNKS))
        table.pop("resumed_play_s", None)  # a base record is its table alone
        return table

    jobs = [(os.path.join(args.out, "runs", f"base-s{s}.json"), lambda s=s: base_play(s)) for s in seeds]
    jobs += [(run_dir_of(args, v, seed) + ".json",
              lambda v=v, seed=seed: train_and_eval(base, v, seed, args)) for seed in seeds for v in variants]
    # Training runs first, the base's plays last: a study that a session's end cuts short has finished the runs,
    # the part it is made to measure, rather than base plays a later session can make in half an hour each.
    order = jobs[len(seeds):] + jobs[:len(seeds)]
    if args.shard:
        # The shards share one job list: each takes the next job none has claimed (a fixed every-n-th split left
        # one shard 529 s of skill arms after the other had finished).
        i = int(args.shard.split("/")[0])
        for path, fn in order[i:] + order[:i]:
            mine = not os.path.exists(path)  # a finished job is only read
            if mine and not claim(path):
                continue
            try:
                r = cached(path, fn)
            finally:
                if mine:
                    release(path)
            if "variant" in r:
                train = [round(i['train_success'], 2) for i in r['iters']]
                print(f"{r['variant']} seed {r['seed']}: train success {train} "
                      f"unseen All {r['table']['success_pct']['All']:.1f} "
                      f"(train {r['train_s']:.0f}s, eval {r['eval_s']:.0f}s)", flush=True)
        print(f"[learning] shard {args.shard} done in {time.time() - t_start:.0f}s")
        return 0
    if args.cached_only:
        missing = [path for path, _ in order if not os.path.exists(path)]
        order = [(path, fn) for path, fn in order if os.path.exists(path)]
        if missing:
            print("[learning] --cached-only: not run yet, left out: "
                  + ", ".join(os.path.basename(m)[:-len(".json")] for m in missing), flush=True)
    done = {path: cached(path, fn) for path, fn in order}
    played = [(s, done[p]) for s, (p, _) in zip(seeds, jobs) if p in done]  # every seed, unless --cached-only
    base_seeds, base_tables = [s for s, _ in played], [t for _, t in played]
    runs = [done[p] for p, _ in jobs[len(seeds):] if p in done]
    if not variants:
        # The base's plays alone (studies/smollm2_study.sh ARMS=base): e.g. a warm start rebuilt on another CPU, played
        # with a study's seeds to compare it game by game with the study's own base (studies/smollm2_runs.py).
        for s, t in played:
            print(f"[learning] base seed {s} on {args.eval_panel}: All {t['success_pct']['All']:.1f} %", flush=True)
        return 0
    if not base_tables or not runs:
        raise SystemExit(f"--cached-only: {args.out}/runs holds no base play or no run of --variants x --seeds to "
                         "report: run the study without --cached-only first")
    seeds = sorted(set(base_seeds) | {r["seed"] for r in runs})
    print(f"[learning] base on {args.eval_panel}: All {[t['success_pct']['All'] for t in base_tables]}", flush=True)
    total = time.time() - t_start
    rows = {"base (no RL)": base_tables}
    for v in variants:
        rows[v] = [r["table"] for r in runs if r["variant"] == v]
    n_eval = base_tables[0].get("episodes", args.eval_episodes)
    print(f"\n{args.eval_panel} success % (mean +- std over seeds {seeds}; no skills at evaluation; "
          f"{args.iters} iterations x {args.tasks_per_iter} tasks x {args.group_size} copies per run)")
    print(table_text(rows))
    if "grpo" in variants:
        print(paired_text(runs, "grpo"))
    print("\nDelta log-prob and advantage scale (median over iterations and seeds):")
    print(delta_text(runs))
    for v in variants:
        z = [zero_signal_fraction(run_dir_of(args, v, s)) for s in seeds]
        z = [x for x in z if x is not None]
        if z:
            print(f"{v}: {100 * statistics.mean(z):.0f} % of rollout groups had no outcome signal "
                  "(all copies won or all lost)")
    headroom = None
    headroom_path = os.path.join(args.out, "runs", "base-headroom.json")
    # --cached-only never plays the oracle panel (about 67 min on SmolLM2): it reports the headroom only if it is read
    if args.headroom_panel and (not args.cached_only or args.headroom_results or os.path.exists(headroom_path)):
        headroom = cached(headroom_path, lambda: base_headroom(base, args, base_weights))
        st, te = headroom["table"]["success_pct"], headroom["teacher_table"]["success_pct"]
        print(f"\nteacher diagnostics of the base on {args.headroom_panel} (oracle step skill at every step): "
              f"student All {st['All']:.1f} %, teacher All {te['All']:.1f} %, "
              f"headroom {te['All'] - st['All']:+.1f} points")
    summ = summary(runs, args.opid_variant, args.shuffled_variant)
    seeds_of = summ["paired_seeds_by_variant"]
    print("summary (success points on All, mean over the seeds paired with GRPO's): "
          + ", ".join(f"{k} {v:+.1f} (seeds {','.join(map(str, seeds_of[k]))})"
                      for k, v in summ["minus_grpo_all_by_variant"].items() if v is not None))
    print(f"\ntotal wall time {total:.0f}s")
    plot(runs, base_tables, os.path.join(args.out, "learning.png"))
    with open(os.path.join(args.out, "learning.json"), "w") as f:
        json.dump({"args": vars(args), "base": base, "base_seeds": base_seeds, "base_tables": base_tables,
                   "runs": runs, "total_s": total, "eval_episodes": n_eval, "summary": summ}, f, indent=1,
                  default=float)
    print(f"wrote {args.out}/learning.json and {args.out}/learning.png")
    if args.results:
        per_seed = {v: {str(r["seed"]): r["table"]["success_pct"] for r in runs if r["variant"] == v} for v in variants}
        per_seed["base (no RL)"] = {str(s): t["success_pct"] for s, t in zip(base_seeds, base_tables)}
        agreement = {v: {str(r["seed"]): r["table"].get("expert_agreement_pct") for r in runs if r["variant"] == v}
                     for v in variants}
        agreement["base (no RL)"] = {str(s): t.get("expert_agreement_pct") for s, t in zip(base_seeds, base_tables)}
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        with open(args.results, "w") as f:
            json.dump({"command": "python -m studies.learning " + " ".join(sys.argv[1:] if argv is None else argv),
                       "eval_panel": args.eval_panel, "eval_episodes": n_eval, "seeds": seeds, "per_seed": per_seed,
                       "per_seed_agreement_pct": agreement,
                       "teacher_diagnostics": None if headroom is None else
                       {"panel": args.headroom_panel, "student": headroom["table"]["success_pct"],
                        "teacher": headroom["teacher_table"]["success_pct"], "headroom": headroom["headroom"]},
                       "delta": delta_text(runs),
                       # wall time of this call (near 0 when it only read cached runs) and what the runs took
                       "total_s": total, "run_seconds": run_seconds(runs), "summary": summ},
                      f, indent=1, default=float)
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
