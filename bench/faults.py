"""OPID training under injected faults: the figures that say training survives them uncorrupted.

(Split by concern: faults_inject.py (fault injection + the audit connector), faults_resume.py
(part 4, kill and resume), faults_report.py (verdicts, tables); this file runs the parts.)

    python -m bench.faults [--iters 3] [--tasks-per-iter 4] [--group-size 4] [--json PATH]
                           [--parts analyzer,env,resume]

Tiny model, env "searchqa" (4-turn episodes keep the runs short), real RLlib Algorithm, real
OpenAI-protocol HTTP server (tests/analyzer/fake_openai_server.py). Four parts:

1. analyzer: the fake server answers a seeded schedule where ~30% of calls time out (slow > the
   client timeout), return HTTP 500 or return junk text; analyzer="openai" with retries. An audit
   connector appended to the learner pipeline (bench only) re-derives every sample's advantage
   from the raw episode (skills dict, sampling log-probs, an independent re-score) and checks it
   is exactly A_out (analysis failed) or A_out + w * Delta (analysis ok); it also recomputes A_out
   from rewards/format flags/groups and scans episodes, results and skill dumps for the API key.
2. env: a SearchQA subclass that raises in step (~25% of calls) and reset (~10%) from a seeded
   schedule; env_errors reported against the injected count.
3. malformed actions: the untrained model's own format-valid rate (measured before injection),
   and in both training runs a seeded ~30% of responses replaced by a well-formed action (token
   ids and log-probs rescored so the sample stays self-consistent): groups then mix valid and
   invalid steps, A_out is non-zero (the model alone gives A_out = 0 everywhere, which would make
   "fallback == A_out" vacuous), and the audit checks A_out(invalid) - A_out(valid) =
   -penalty / (sigma_g + eps) within each mixed trajectory.
4. resume: `opid-train --no-tune --checkpoint-freq 1` in a subprocess, SIGKILLed mid-iteration
   after its 2nd checkpoint; a new process restores the last checkpoint, compares learner module
   tensors byte for byte with the checkpoint file, checks the iteration counter and task-RNG
   position, and trains one more iteration; then `opid-train --resume <checkpoint>` must continue
   with the next iteration too. Part 4 runs in subprocesses alongside parts 1-3 (--serial: before).

The API-key scan prints a FAIL verdict if the key (read from $OPID_BENCH_ANALYZER_KEY via
`api_key_env`) shows up in any result, checkpoint file or skill dump. This bench found that a key
placed in analyzer_config leaked into results and checkpoints; keys now come only from the
environment and `validate()` rejects a literal key.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from bench.faults_inject import (
    API_KEY, AUDIT, CRASH_ENV_ID, ENV_FAULTS, INJECT, PENALTY, W, AuditedOPIDConfig, FaultySearchQA,
    MixedFormatRunner, ScheduledFakeServer, _ENV_RNG, _INJECT_RNG, fault_schedule)
from bench.faults_report import metric, print_report, verdicts, _audit_sum
from opid_rllib.presets import apply_settings
from bench.faults_resume import part_resume, resume_child, train_child


def make_config(env, args, **overrides):
    settings = dict(llm_model="tiny", max_new_tokens=args.max_new_tokens, max_prompt_len=512, history_length=2,
                    max_steps=args.max_steps, group_size=args.group_size, tasks_per_iter=args.tasks_per_iter,
                    micro_batch_size=16, score_micro_batch_size=16, analyzer_num_workers=2,
                    episode_skill_adv_weight=W, step_skill_adv_weight=W, max_step_skills_per_traj=2,
                    invalid_action_penalty=PENALTY)
    settings.update(overrides)
    cfg = AuditedOPIDConfig().environment(env, env_config={"max_steps": args.max_steps})
    apply_settings(cfg, **settings)
    cfg.lr = 1e-5
    return cfg.debugging(seed=args.seed)


def _files_with(root, secret: str) -> list[str]:
    hits = []
    for p in Path(root).rglob("*"):
        try:
            if p.is_file() and secret.encode() in p.read_bytes():
                hits.append(str(p.relative_to(root)))
        except OSError:
            pass
    return sorted(hits)


def _train(cfg, iters, per_iter_extra, scan_dir=None):
    """Build, run `iters` iterations; per iteration: figures from the result + extra()."""
    t0 = time.perf_counter()
    algo = cfg.build_algo()
    build_s = time.perf_counter() - t0
    rows, crashed = [], None
    try:
        for _ in range(iters):
            n_audit = len(AUDIT)
            t = time.perf_counter()
            res = algo.train()
            row = {"iter": int(res["training_iteration"]), "wall_s": round(time.perf_counter() - t, 1),
                   "format_valid_rate": metric(res, "opid/format_valid_rate"),
                   "episodes": metric(res, "env_runners/num_episodes"),
                   "key_in_result": API_KEY in json.dumps(res, default=str),
                   "rollout_s": metric(res, "timers/env_runner_sampling_timer"),
                   "learner_s": metric(res, "timers/learner_update_timer")}
            row.update(per_iter_extra(res))
            row["audit"] = AUDIT[-1] if len(AUDIT) > n_audit else None
            rows.append(row)
            print(f"  iter {row['iter']}: {row['wall_s']}s", flush=True)
        dump_dir = Path(algo.logdir) / "opid_skills"
        key_in_dumps = any(API_KEY in p.read_text() for p in dump_dir.glob("*.jsonl")) if dump_dir.exists() else None
        leak_files = {}
        if scan_dir is not None:  # where else does the secret end up on disk?
            ckpt = algo.save_to_path(str(Path(scan_dir) / "ckpt"))
            leak_files = {"logdir": _files_with(algo.logdir, API_KEY), "checkpoint": _files_with(ckpt, API_KEY)}
    except Exception as e:  # training must keep going: a crash IS the finding
        crashed, key_in_dumps, leak_files = f"{type(e).__name__}: {e}"[:500], None, {}
    finally:
        algo.stop()
    return {"build_s": round(build_s, 1), "iterations": rows, "crashed": crashed, "key_in_skill_dumps": key_in_dumps,
            "key_in_files": leak_files}


# ------------------------------------------------------------------------------- parts ---------
def _use_injection(cfg, args, tag):
    """Both training runs: ~30% well-formed actions mixed in, so groups mix valid and invalid
    steps and A_out is non-zero (the untrained model alone gives A_out = 0 everywhere)."""
    cfg.env_runners(env_runner_cls=MixedFormatRunner)
    _INJECT_RNG.seed(f"valid-inject-{tag}-{args.seed}")
    INJECT["rate"] = args.valid_inject_rate
    seen = dict(INJECT)

    def extra():
        row = {"injected_valid_actions": INJECT["count"] - seen["count"],
               "model_format_valid_rate": (INJECT["natural_valid"] - seen["natural_valid"])
               / max(INJECT["natural_total"] - seen["natural_total"], 1)}
        seen.update(INJECT)
        return row

    return extra


def part_analyzer(args, tmp: Path):
    schedule = fault_schedule(5000, args.fault_rate, args.seed)
    srv = ScheduledFakeServer(modes=schedule, slow_s=args.slow_s).start()
    seen = {"n": 0}

    def extra(res):
        served = srv.served[seen["n"]:]
        seen["n"] = len(srv.served)
        auth_ok = all({k.lower(): v for k, v in r["headers"].items()}.get("authorization") == f"Bearer {API_KEY}"
                      for r in srv.requests)
        kinds = ("good", "slow", "error500", "junk")
        return {"http_requests": len(served), **{f"served_{m}": served.count(m) for m in kinds},
                "analyzer_calls": metric(res, "env_runners/analyzer/calls"),
                "analyzer_errors": metric(res, "env_runners/analyzer/errors"),
                "analyzer_latency_s": metric(res, "env_runners/analyzer/total_latency_s"),
                "analyzer_wait_s": metric(res, "env_runners/opid_runner/analyzer_wait_s"),
                "analysis_trajectories": metric(res, "learners/opid/analysis_trajectories"),
                "analysis_failed_trajectories": metric(res, "learners/opid/analysis_failed_trajectories"),
                "key_sent_to_server": auth_ok}

    os.environ["OPID_BENCH_ANALYZER_KEY"] = API_KEY  # keys live in the environment, never in the config
    cfg = make_config("searchqa", args, analyzer="openai", analyzer_config={
        "base_url": srv.base_url, "api_key_env": "OPID_BENCH_ANALYZER_KEY", "model": "fake",
        "timeout_s": args.timeout_s, "max_retries": 2, "retry_delay_s": 0.05})
    inj = _use_injection(cfg, args, "analyzer")
    try:
        out = _train(cfg, args.iters, lambda res: {**extra(res), **inj()}, scan_dir=tmp / "analyzer_ckpt")
    finally:
        srv.stop()
        INJECT["rate"] = 0.0
    served = srv.served
    out["server"] = {"requests": len(served), "fault_share": round(1 - served.count("good") / max(len(served), 1), 3),
                     **{m: served.count(m) for m in ("good", "slow", "error500", "junk")}}
    return out


def part_env(args):
    import gymnasium as gym
    from gymnasium.envs.registration import registry

    if CRASH_ENV_ID not in registry:
        gym.register(CRASH_ENV_ID, entry_point=FaultySearchQA, disable_env_checker=True)
    _ENV_RNG.seed(f"env-faults-{args.seed}")
    seen = {"step": 0, "reset": 0}

    def extra(res):
        row = {"injected_step_faults": ENV_FAULTS["step"] - seen["step"],
               "injected_reset_faults": ENV_FAULTS["reset"] - seen["reset"],
               "runner_env_errors": metric(res, "env_runners/opid_runner/env_errors"),
               "episodes_with_env_error": metric(res, "opid/env_errors"),
               "episode_len_mean": metric(res, "opid/episode_len_mean"),
               "policy_loss": metric(res, "learners/default_policy/policy_loss")}
        seen.update(step=ENV_FAULTS["step"], reset=ENV_FAULTS["reset"])
        return row

    cfg = make_config(CRASH_ENV_ID, args)  # hindsight analyzer
    inj = _use_injection(cfg, args, "env")
    try:
        return _train(cfg, args.iters, lambda res: {**extra(res), **inj()})
    finally:
        INJECT["rate"] = 0.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="analyzer,env,resume")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--tasks-per-iter", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fault-rate", type=float, default=0.3, help="share of analyzer HTTP calls that fail")
    p.add_argument("--timeout-s", type=float, default=1.0, help="analyzer client timeout")
    p.add_argument("--slow-s", type=float, default=3.0, help="how long a 'slow' answer takes")
    p.add_argument("--valid-inject-rate", type=float, default=0.3)
    p.add_argument("--kill-after-ckpts", type=int, default=2)
    p.add_argument("--trainer", choices=("cli", "script"), default="cli", help="part 4's killed trainer")
    p.add_argument("--kill-delay-s", type=float, default=2.0)
    p.add_argument("--resume-timeout-s", type=float, default=300.0)
    p.add_argument("--serial", action="store_true", help="run part 4 before parts 1-3, not alongside")
    p.add_argument("--json", default=None)
    p.add_argument("--_resume-child", dest="resume_child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_train-argv", dest="train_argv", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_train-child", dest="train_child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.train_child:
        return train_child(json.loads(args.train_argv))
    if args.resume_child:
        return resume_child(args.resume_child, json.loads(args.train_argv))
    os.environ.setdefault("OPID_CACHE_DIR", "/tmp/opid_cache")
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    fig: dict = {"args": vars(args)}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opid_faults_") as tmp:
        resume_thread = None
        if "resume" in parts:  # subprocesses only: runs alongside parts 1-3 unless --serial
            def run_resume():
                try:
                    fig["resume"] = part_resume(args, Path(tmp))
                except Exception as e:
                    fig["resume"] = {"error": f"{type(e).__name__}: {e}"}

            print("part 4: kill and resume (subprocesses)", flush=True)
            resume_thread = threading.Thread(target=run_resume, daemon=True)
            resume_thread.start()
            if args.serial:
                resume_thread.join()
        if "analyzer" in parts:
            print("part 1: analyzer faults", flush=True)
            fig["analyzer"] = part_analyzer(args, Path(tmp))
            it = fig["analyzer"]["iterations"]
            fig["malformed"] = {"analyzer_run_model_format_valid_rate": [r["model_format_valid_rate"] for r in it],
                                "analyzer_run_format_valid_rate": [r["format_valid_rate"] for r in it]}
        if "env" in parts:
            print("part 2/3: env faults + mixed action formats", flush=True)
            fig["env"] = part_env(args)
            it = fig["env"]["iterations"]
            fig.setdefault("malformed", {}).update(
                env_run_model_format_valid_rate=[r["model_format_valid_rate"] for r in it],
                env_run_format_valid_rate=[r["format_valid_rate"] for r in it])
        runs = [fig[k]["iterations"] for k in ("analyzer", "env") if k in fig]
        if runs:
            fig.setdefault("malformed", {}).update(
                mixed_validity_trajs=sum(_audit_sum(it, "mixed_validity_trajs") for it in runs),
                penalty_gap_max_err=max(((r["audit"] or {}).get("penalty_gap_max_err", 0) for it in runs for r in it),
                                        default=None),
                outcome_adv_max_err=max(((r["audit"] or {}).get("outcome_adv_max_err", 0) for it in runs for r in it),
                                        default=None))
        if resume_thread is not None:
            resume_thread.join()
    fig["total_wall_s"] = round(time.perf_counter() - t_all, 1)
    fig["verdicts"] = verdicts(fig)
    print_report(fig)
    print(f"\ntotal wall time: {fig['total_wall_s']} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
