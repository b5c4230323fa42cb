"""OPID training under injected faults: the figures that say training survives them uncorrupted.

    python bench/faults.py [--iters 3] [--tasks-per-iter 4] [--group-size 4] [--json PATH]
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
import pickle
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ray.rllib.connectors.connector_v2 import ConnectorV2  # noqa: E402

from envs.searchqa.env import SearchQAEnv  # noqa: E402
from opid_rllib.algorithm import OPIDConfig  # noqa: E402
from opid_rllib.env_runner import GroupedTextEnvRunner  # noqa: E402
from opid_rllib.generation.base import Generation  # noqa: E402
from tests.analyzer.fake_openai_server import FakeOpenAIServer  # noqa: E402

API_KEY = "sk-test-faults0bench0secret0key0123456789"
W = 0.5          # skill weights: large, so the teacher term is far above float noise
PENALTY = 0.1    # invalid_action_penalty (the default)
EPS = 1e-6       # outcome_advantage's eps
AUDIT: list[dict] = []   # one entry per learner-pipeline call (local learner: same process)


# ---------------------------------------------------------------- fault injection: analyzer ---
class ScheduledFakeServer(FakeOpenAIServer):
    """The repo's fake OpenAI server; records which mode served every chat request."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.served: list[str] = []

    def _next_mode(self) -> str:
        mode = super()._next_mode()
        with self._lock:
            self.served.append(mode)
        return mode


def fault_schedule(n: int, rate: float, seed: int) -> list[str]:
    """Seeded per-call modes: `rate` of calls split evenly over slow / error500 / junk."""
    rng = random.Random(f"analyzer-faults-{seed}")
    out = []
    for _ in range(n):
        u = rng.random()
        out.append("good" if u >= rate else ("slow", "error500", "junk")[int(3 * u / rate)])
    return out


# --------------------------------------------------------------------- fault injection: env ---
ENV_FAULTS = {"step_rate": 0.25, "reset_rate": 0.10, "seed": 0, "step": 0, "reset": 0}
_ENV_RNG = random.Random(0)
CRASH_ENV_ID = "opid-bench/FaultySearchQA-v0"


class FaultySearchQA(SearchQAEnv):
    """A real SearchQA env whose step / reset raise on a seeded fraction of calls (process-wide
    schedule, so rebuilt envs continue it)."""

    def _reset_task(self, task_id):
        if _ENV_RNG.random() < ENV_FAULTS["reset_rate"]:
            ENV_FAULTS["reset"] += 1
            raise ConnectionError("injected reset fault")
        return super()._reset_task(task_id)

    def _step_task(self, action):
        if _ENV_RNG.random() < ENV_FAULTS["step_rate"]:
            ENV_FAULTS["step"] += 1
            raise RuntimeError("injected step fault")
        return super()._step_task(action)


# ------------------------------------------------------ fault injection: action formats -------
INJECT = {"rate": 0.0, "count": 0, "natural_valid": 0, "natural_total": 0}
_INJECT_RNG = random.Random(0)


class MixedFormatRunner(GroupedTextEnvRunner):
    """With probability INJECT['rate'] a response is replaced by a well-formed SearchQA action.
    Token ids and log-probs are those of the replacement under the current policy, so the
    sample is exactly what sampling that text would have produced."""

    def _step_slot(self, sl, prompt, gen, was_cut, counts):
        from opid_rllib.prompts import project_action

        INJECT["natural_valid"] += int(project_action(self.env_name, gen.text)[1])  # the model's own rate
        INJECT["natural_total"] += 1
        if INJECT["rate"] > 0 and _INJECT_RNG.random() < INJECT["rate"]:
            text = "<answer>unknown</answer>" if len(sl["history"]) else "<search>capital</search>"
            m = self.module
            ids = m.tokenizer(text, add_special_tokens=False)["input_ids"][: self.settings["max_new_tokens"]]
            p_ids, _ = m.encode_prompts([prompt])
            logp = m.score(p_ids, [ids])[0]
            gen = Generation(token_ids=list(ids), logprobs=[float(x) for x in logp], text=text)
            INJECT["count"] += 1
        return super()._step_slot(sl, prompt, gen, was_cut, counts)


# --------------------------------------------------------------------------- the audit ---------
class AuditAdvantages(ConnectorV2):
    """Last piece of the learner pipeline (bench only): re-derives each sample's advantage from
    the raw episodes, independently of the pipeline's intermediate table."""

    def __init__(self, *a, w_ep=W, w_step=W, penalty=PENALTY, secret=API_KEY, **kw):
        super().__init__(*a, **kw)
        self.w_ep, self.w_step, self.penalty, self.secret = w_ep, w_step, penalty, secret

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kw):
        from ray.rllib.core import DEFAULT_MODULE_ID

        from opid_rllib.connectors.common import log, policy_module
        from opid_rllib.prompts import insert_skills

        module = policy_module(rl_module)
        out = batch[DEFAULT_MODULE_ID]
        adv_all = out["advantages"].numpy()
        a = dict(samples=0, fallback_samples=0, fallback_exact=0, fallback_nonzero_outcome=0, skill_samples=0, skill_match=0,
                 skill_teacher_nonzero=0, misrouted=0, nonfinite=int((~np.isfinite(adv_all)).sum()),
                 outcome_adv_max_err=0.0, failed_trajs=0, ok_trajs=0, key_leaks_in_episodes=0,
                 invalid_samples=0, mixed_validity_trajs=0, penalty_gap_max_err=0.0, penalty_gap_mean=None)
        # Independent A_out: S_i = R - penalty * (1 - valid_i), GRPO stats over all steps of a group.
        rows, groups = [], {}
        for ep in episodes:
            meta = ep.custom_data["opid"]
            if self.secret in json.dumps(meta, default=str):
                a["key_leaks_in_episodes"] += 1
            valid = np.asarray(ep.get_extra_model_outputs("format_valid"), bool)
            score = float(sum(ep.get_rewards())) - self.penalty * (~valid)
            groups.setdefault(meta["group_id"], []).append(score)
            rows.append((ep, meta, valid, score))
        stats = {}
        for g, scores in groups.items():
            s = np.concatenate(scores)
            stats[g] = (0.0, 1.0) if len(s) == 1 else (s.mean(), s.std(ddof=1))
        gaps = []
        i = 0
        for ep, meta, valid, score in rows:
            mu, sd = stats[meta["group_id"]]
            a_out = (score - mu) / (sd + EPS)
            skills = meta.get("skills")
            ok = bool(skills) and not skills.get("error") and bool((skills.get("episode_skill") or "").strip())
            a["ok_trajs" if ok else "failed_trajs"] += 1
            a["invalid_samples"] += int((~valid).sum())
            if valid.any() and (~valid).any():
                a["mixed_validity_trajs"] += 1
                gap = float(np.mean(a_out[~valid]) - np.mean(a_out[valid]))
                gaps.append(gap)
                a["penalty_gap_max_err"] = max(a["penalty_gap_max_err"], abs(gap + self.penalty / (sd + EPS)))
            prompts = ep.get_extra_model_outputs("prompt")
            resp = ep.get_extra_model_outputs("response_ids")
            rlen = ep.get_extra_model_outputs("response_len")
            logp = ep.get_extra_model_outputs("logp")
            for k in range(len(ep)):
                n = int(rlen[k])
                adv = adv_all[i]
                a["samples"] += 1
                a["outcome_adv_max_err"] = max(a["outcome_adv_max_err"], abs(float(meta["outcome_adv"][k]) - a_out[k]))
                want_out = np.float32(meta["outcome_adv"][k])
                if not ok:
                    a["fallback_samples"] += 1
                    a["fallback_nonzero_outcome"] += int(abs(float(want_out)) > 1e-3)  # check is not 0 == 0
                    a["fallback_exact"] += int(np.all(adv[:n] == want_out) and np.all(adv[n:] == 0))
                else:
                    a["skill_samples"] += 1
                    steps = skills.get("step_skills") or {}
                    st = steps.get(str(k)) or steps.get(k)
                    if st and st.strip():
                        p2, w = insert_skills(str(prompts[k]), step_skill=st), self.w_step
                    else:
                        p2, w = insert_skills(str(prompts[k]), episode_skill=skills["episode_skill"]), self.w_ep
                    ids, _ = module.encode_prompts([p2])
                    teacher = module.score(ids, [[int(x) for x in resp[k][:n]]])[0]
                    want = want_out + w * (teacher - np.asarray(logp[k][:n], np.float32))
                    a["skill_match"] += int(np.allclose(adv[:n], want, atol=1e-4, rtol=0) and np.all(adv[n:] == 0))
                    a["skill_teacher_nonzero"] += int(np.abs(adv[:n] - want_out).max(initial=0) > 1e-4)
                i += 1
        a["misrouted"] = a["samples"] - a["fallback_exact"] - a["skill_match"]
        a["penalty_gap_mean"] = float(np.mean(gaps)) if gaps else None
        a["batch_rows"] = int(adv_all.shape[0])
        AUDIT.append(a)
        for k in ("fallback_exact", "skill_match", "misrouted", "nonfinite"):
            log(metrics, f"audit/{k}", a[k])
        return batch


class AuditedOPIDConfig(OPIDConfig):
    def build_learner_connector(self, input_observation_space, input_action_space, device=None):
        pipe = super().build_learner_connector(input_observation_space, input_action_space, device)
        pipe.append(AuditAdvantages(w_ep=self.episode_skill_adv_weight, w_step=self.step_skill_adv_weight,
                                    penalty=self.invalid_action_penalty))
        return pipe


def make_config(env, args, **overrides):
    settings = dict(llm_model="tiny", max_new_tokens=args.max_new_tokens, max_prompt_len=512, history_length=2,
                    max_steps=args.max_steps, group_size=args.group_size, tasks_per_iter=args.tasks_per_iter,
                    micro_batch_size=16, score_micro_batch_size=16, analyzer_num_workers=2,
                    episode_skill_adv_weight=W, step_skill_adv_weight=W, max_step_skills_per_traj=2,
                    invalid_action_penalty=PENALTY)
    settings.update(overrides)
    cfg = AuditedOPIDConfig().environment(env, env_config={"max_steps": args.max_steps})
    cfg._set(**settings)
    cfg.lr = 1e-5
    return cfg.debugging(seed=args.seed)


def _g(d, path, default=None):
    for k in path.split("/"):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return float(d) if isinstance(d, (int, float, np.floating, np.integer)) else d


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
                   "format_valid_rate": _g(res, "opid/format_valid_rate"),
                   "episodes": _g(res, "env_runners/num_episodes"),
                   "key_in_result": API_KEY in json.dumps(res, default=str),
                   "rollout_s": _g(res, "timers/env_runner_sampling_timer"),
                   "learner_s": _g(res, "timers/learner_update_timer")}
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
        return {"http_requests": len(served), **{f"served_{m}": served.count(m) for m in ("good", "slow", "error500", "junk")},
                "analyzer_calls": _g(res, "env_runners/analyzer/calls"),
                "analyzer_errors": _g(res, "env_runners/analyzer/errors"),
                "analyzer_latency_s": _g(res, "env_runners/analyzer/total_latency_s"),
                "analyzer_wait_s": _g(res, "env_runners/opid_runner/analyzer_wait_s"),
                "analysis_trajectories": _g(res, "learners/opid/analysis_trajectories"),
                "analysis_failed_trajectories": _g(res, "learners/opid/analysis_failed_trajectories"),
                "key_sent_to_server": auth_ok}

    os.environ["OPID_BENCH_ANALYZER_KEY"] = API_KEY  # keys live in the environment, never in the config
    cfg = make_config("searchqa", args, analyzer="openai", analyzer_config={
        "base_url": srv.base_url, "api_key_env": "OPID_BENCH_ANALYZER_KEY", "model": "fake", "timeout_s": args.timeout_s,
        "max_retries": 2, "retry_delay_s": 0.05})
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
               "runner_env_errors": _g(res, "env_runners/opid_runner/env_errors"),
               "episodes_with_env_error": _g(res, "opid/env_errors"),
               "episode_len_mean": _g(res, "opid/episode_len_mean"),
               "policy_loss": _g(res, "learners/default_policy/policy_loss")}
        seen.update(step=ENV_FAULTS["step"], reset=ENV_FAULTS["reset"])
        return row

    cfg = make_config(CRASH_ENV_ID, args)  # hindsight analyzer
    inj = _use_injection(cfg, args, "env")
    try:
        return _train(cfg, args.iters, lambda res: {**extra(res), **inj()})
    finally:
        INJECT["rate"] = 0.0


def _session_pids(sid: int) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # fields after ")": state ppid pgrp session ...
                pids.append(int(p.name))
    return pids


def part_resume(args, tmp: Path):
    out_dir = tmp / "resume_run"
    train_argv = ["--env", "searchqa", "--cpu-example", "--no-tune", "--checkpoint-freq", "1", "--stop-iters", "8",
                  "--group-size", "2", "--tasks-per-iter", "2", "--max-steps", "2", "--max-new-tokens", "8",
                  "--num-cpus", "2", "--seed", str(args.seed), "--output", str(out_dir)]
    exe = Path(sys.executable).with_name("opid-train")
    cli = [str(exe)] if exe.exists() else [sys.executable, "-m", "opid_rllib.cli.train"]
    # --trainer script: the CLI's exact config and --no-tune loop in this file (if the CLI breaks).
    cmd = cli + train_argv if args.trainer == "cli" else \
        [sys.executable, __file__, "--_train-child", "--_train-argv", json.dumps(train_argv)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines, ckpts, done = [], [], threading.Event()

    def reader():
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.startswith("checkpoint:"):
                ckpts.append(line.split(":", 1)[1].strip())
                if len(ckpts) >= args.kill_after_ckpts:
                    done.set()
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    done.wait(timeout=args.resume_timeout_s)
    res = {"trainer": ("opid-train " if args.trainer == "cli" else "bench --_train-child ") + " ".join(train_argv),
           "checkpoints_seen": [Path(c).name for c in ckpts]}
    if len(ckpts) < args.kill_after_ckpts:
        res["error"] = "trainer produced too few checkpoints before the timeout / exit"
        res["trainer_tail"] = lines[-15:]
        _kill_session(proc)
        return res
    time.sleep(args.kill_delay_s)  # the next iteration is under way
    alive_before = proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    rc = proc.wait()
    leftovers = _kill_session(proc)
    res.update(killed_mid_run=alive_before, kill_returncode=rc, kill_after_s=round(time.perf_counter() - t0, 1),
               session_processes_left_after_kill=leftovers,
               checkpoint_dirs_on_disk=sorted(p.name for p in out_dir.glob("checkpoint_*")))
    last = ckpts[-1]
    child = subprocess.run([sys.executable, __file__, "--_resume-child", last, "--_train-argv", json.dumps(train_argv)],
                           capture_output=True, text=True, timeout=args.resume_timeout_s, start_new_session=True)
    payload = [ln for ln in child.stdout.splitlines() if ln.startswith("RESUME_JSON ")]
    if child.returncode != 0 or not payload:
        res["error"] = f"resume child rc={child.returncode}"
        res["resume_tail"] = (child.stdout + child.stderr).splitlines()[-20:]
    else:
        res.update(json.loads(payload[-1][len("RESUME_JSON "):]))
    if args.trainer == "cli":  # and the CLI's own --resume continues from the same checkpoint
        argv2 = list(train_argv)
        argv2[argv2.index("--stop-iters") + 1] = str(int(Path(last).name.split("_")[-1]) + 1)
        cont = subprocess.run(cli + argv2 + ["--resume", last], capture_output=True, text=True,
                              timeout=args.resume_timeout_s, start_new_session=True)
        out_lines = cont.stdout.splitlines()
        res["cli_resume_rc"] = cont.returncode
        res["cli_resume_lines"] = [ln[:120] for ln in out_lines if ln.startswith(("resumed from", "iter ", "checkpoint:"))]
        if cont.returncode != 0:
            res["cli_resume_tail"] = (cont.stdout + cont.stderr).splitlines()[-15:]
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    return res


def _kill_session(proc) -> int:
    """SIGKILL what is left of the trainer's own session (Ray helpers it started); returns how many."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    pids = [p for p in _session_pids(proc.pid) if p != os.getpid()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def train_child(train_argv: list[str]) -> int:
    """The trainer that gets SIGKILLed: opid-train's config and its --no-tune loop (cli/train.py)."""
    import ray

    import opid_rllib
    from opid_rllib.cli.train import build_parser, config_from_args

    args = build_parser().parse_args(train_argv)
    cfg = config_from_args(args)
    ray.init(num_cpus=args.num_cpus or None, include_dashboard=False, ignore_reinit_error=True)
    opid_rllib.register()
    algo = cfg.build_algo()
    while algo.iteration < args.stop_iters:
        t0 = time.time()
        res = algo.train()
        it = algo.iteration
        print(f"iter {it}: format_ok={_g(res, 'opid/format_valid_rate'):.3f} time={time.time() - t0:.1f}s", flush=True)
        if args.checkpoint_freq and it % args.checkpoint_freq == 0:
            print("checkpoint:", algo.save_to_path(os.path.join(args.output, f"checkpoint_{it:05d}")), flush=True)
    algo.stop()
    return 0


def resume_child(ckpt: str, train_argv: list[str]) -> int:
    """New process: restore `ckpt`, compare weights with the checkpoint file, train one iteration."""
    import ray
    import torch

    import envs
    import opid_rllib
    from opid_rllib.cli.train import build_parser, config_from_args

    args = build_parser().parse_args(train_argv)
    cfg = config_from_args(args)
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    opid_rllib.register()
    out = {}
    algo = cfg.build_algo()
    t = time.perf_counter()
    algo.restore_from_path(ckpt)
    out["restore_s"] = round(time.perf_counter() - t, 2)
    ckpt_iter = int(Path(ckpt).name.split("_")[-1])
    out["checkpoint_iteration"] = ckpt_iter
    out["restored_iteration"] = int(algo.iteration)
    # Learner module tensors vs the checkpoint file on disk, byte for byte.
    with open(Path(ckpt) / "learner_group" / "learner" / "rl_module" / "default_policy" / "module_state.pkl", "rb") as f:
        disk = pickle.load(f)
    live = algo.learner_group.get_state()["learner"]["rl_module"]["default_policy"]

    def raw(v):
        t = torch.as_tensor(v).detach().cpu().contiguous()
        return str(t.dtype), tuple(t.shape), t.view(torch.uint8).numpy().tobytes() if t.numel() else b""

    same = [k for k in disk if k in live and raw(disk[k]) == raw(live[k])]
    out["weights_tensors"] = len(disk)
    out["weights_byte_identical"] = len(same)
    out["weights_all_identical"] = len(same) == len(disk) == len(live)
    out["weights_bytes_compared"] = int(sum(len(raw(disk[k])[2]) for k in same))
    runner = algo.env_runner.module.get_state()
    out["runner_weights_match_learner"] = all(torch.equal(runner[k], torch.as_tensor(live[k])) for k in runner)
    # Task stream: restored RNG == a fresh RNG(seed) that drew ckpt_iter iterations of tasks.
    n_ids = len(envs.make(cfg.env, **dict(cfg.env_config)).task_ids())
    ref = np.random.default_rng(cfg.seed)
    for _ in range(ckpt_iter):
        ref.integers(n_ids, size=cfg.tasks_per_iter)
    out["task_rng_at_right_position"] = ref.bit_generator.state == algo._task_rng.bit_generator.state
    steps_before = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"), default=0)
    res = algo.train()
    out["next_training_iteration"] = int(res["training_iteration"])
    out["env_steps_lifetime_before_after"] = [float(steps_before), float(_g(res, "num_env_steps_sampled_lifetime") or 0)]
    out["policy_loss_finite"] = bool(np.isfinite(_g(res, "learners/default_policy/policy_loss", float("nan"))))
    algo.stop()
    ray.shutdown()
    print("RESUME_JSON " + json.dumps(out), flush=True)
    return 0


# ------------------------------------------------------------------------------- report --------
def _sum(rows, key):
    vals = [r.get(key) for r in rows if r.get(key) is not None]
    return sum(vals) if vals else None


def _audit_sum(rows, key):
    return sum((r["audit"] or {}).get(key, 0) or 0 for r in rows)


def verdicts(fig) -> dict:
    """The yes/no answers the figures support."""
    v = {}
    for name in ("analyzer", "env"):
        if name in fig:
            it = fig[name]["iterations"]
            v[f"{name}: training kept going ({len(it)}/{fig['args']['iters']} iterations)"] = \
                not fig[name]["crashed"] and len(it) == fig["args"]["iters"]
            v[f"{name}: every sample is exactly fallback or outcome+w*Delta "
              f"({_audit_sum(it, 'samples')} samples, {_audit_sum(it, 'misrouted')} bad, "
              f"{_audit_sum(it, 'nonfinite')} non-finite)"] = \
                _audit_sum(it, "samples") > 0 and _audit_sum(it, "misrouted") == 0 and _audit_sum(it, "nonfinite") == 0
    if "analyzer" in fig:
        a = fig["analyzer"]
        it = a["iterations"]
        v[f"analyzer: fallback exercised ({_audit_sum(it, 'fallback_samples')} samples of "
          f"{_audit_sum(it, 'failed_trajs')} failed trajectories, {_audit_sum(it, 'fallback_nonzero_outcome')} "
          f"with A_out != 0)"] = _audit_sum(it, "fallback_nonzero_outcome") > 0
        v["analyzer: failed-trajectory metric == pool errors == audit count"] = all(
            r["analysis_failed_trajectories"] == r["analyzer_errors"] == (r["audit"] or {}).get("failed_trajs")
            for r in it)
        v["analyzer: API key absent from episodes / results / skill dumps / logdir / checkpoint"] = (
            _audit_sum(it, "key_leaks_in_episodes") == 0 and not any(r["key_in_result"] for r in it)
            and not a["key_in_skill_dumps"] and not any(a.get("key_in_files", {}).values()))
    if "env" in fig:
        it = fig["env"]["iterations"]
        v["env: runner env_errors == injected step+reset faults, every iteration"] = all(
            r["runner_env_errors"] == r["injected_step_faults"] + r["injected_reset_faults"] for r in it)
        v["env: faults were injected"] = sum(r["injected_step_faults"] + r["injected_reset_faults"] for r in it) > 0
    if "malformed" in fig:
        m = fig["malformed"]
        mixed, err = m.get("mixed_validity_trajs", 0), m.get("penalty_gap_max_err")
        v[f"malformed: A_out(invalid) - A_out(valid) = -penalty/(sigma+eps) ({mixed} mixed trajectories, "
          f"max err {err})"] = mixed > 0 and err is not None and err < 1e-4
    if "resume" in fig:
        r = fig["resume"]
        v["resume: killed mid-run after a checkpoint"] = bool(r.get("killed_mid_run")) and r.get("kill_returncode") == -9
        v["resume: restored learner weights byte-identical to checkpoint file"] = bool(r.get("weights_all_identical"))
        v["resume: continues at checkpoint iteration + 1 with the right task stream"] = (
            r.get("restored_iteration") == r.get("checkpoint_iteration")
            and r.get("next_training_iteration") == (r.get("checkpoint_iteration") or 0) + 1
            and bool(r.get("task_rng_at_right_position")))
        if "cli_resume_rc" in r:
            want = f"iter {(r.get('checkpoint_iteration') or 0) + 1}:"
            v["resume: `opid-train --resume <last checkpoint>` continues with the next iteration"] = (
                r["cli_resume_rc"] == 0 and any(ln.startswith(want) for ln in r.get("cli_resume_lines", [])))
    return v


def print_report(fig):
    def table(title, rows, cols):
        print(f"\n{title}")
        print("".join(f"{c:>{max(len(c), 6) + 1}}" for c in cols))
        for r in rows:
            cells = []
            for c in cols:
                v = r.get(c, (r.get("audit") or {}).get(c))
                if v is None:
                    v = "-"
                elif isinstance(v, (float, np.floating)):
                    v = int(v) if float(v).is_integer() else (f"{v:.2e}" if abs(v) < 1e-2 else f"{v:.3f}")
                cells.append(f"{str(v):>{max(len(c), 6) + 1}}")
            print("".join(cells))

    if "analyzer" in fig:
        a = fig["analyzer"]
        table("1. analyzer faults (fake OpenAI server, seeded ~30% timeout/500/junk; per iteration)", a["iterations"],
              ["iter", "wall_s", "rollout_s", "analyzer_wait_s", "http_requests", "served_slow", "served_error500",
               "served_junk", "analyzer_calls", "analyzer_errors", "analysis_failed_trajectories"])
        table("   batch audit (advantage of every sample re-derived from the raw episode)", a["iterations"],
              ["iter", "samples", "fallback_samples", "fallback_exact", "fallback_nonzero_outcome", "skill_samples",
               "skill_match",
               "skill_teacher_nonzero", "misrouted", "nonfinite", "outcome_adv_max_err"])
        print(f"   server totals: {a.get('server')}")
        print(f"   API key found in: results={[r['iter'] for r in a['iterations'] if r['key_in_result']]} "
              f"episodes={_audit_sum(a['iterations'], 'key_leaks_in_episodes')} skill_dumps={a['key_in_skill_dumps']} "
              f"files={a.get('key_in_files')}")
    if "env" in fig:
        e = fig["env"]
        table("2. env faults (SearchQA raising in ~25% of steps, ~10% of resets)", e["iterations"],
              ["iter", "wall_s", "episodes", "injected_step_faults", "injected_reset_faults", "runner_env_errors",
               "episodes_with_env_error", "episode_len_mean", "policy_loss", "misrouted", "nonfinite"])
    pen_cols = ["iter", "model_format_valid_rate", "injected_valid_actions", "format_valid_rate", "invalid_samples",
                "mixed_validity_trajs", "penalty_gap_mean", "penalty_gap_max_err", "outcome_adv_max_err"]
    for k in ("analyzer", "env"):
        if k in fig:
            table(f"3. malformed actions + invalid-action penalty ({k} run; ~30% well-formed actions injected)",
                  fig[k]["iterations"], pen_cols)
    if "malformed" in fig:
        print(f"\n3. malformed actions: {json.dumps(fig['malformed'], default=float)}")
    if "resume" in fig:
        print("\n4. kill and resume")
        for k, v in fig["resume"].items():
            if k.endswith("_tail"):
                v = "\n      " + "\n      ".join(map(str, v))
            print(f"   {k}: {v}")
    print("\nverdicts")
    for k, ok in fig.get("verdicts", {}).items():
        print(f"   [{'ok' if ok else 'FAIL'}] {k}")


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
