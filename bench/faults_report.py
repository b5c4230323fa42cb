"""Verdicts and tables of bench/faults.py (run that, not this): pure functions of the figures dict."""

from __future__ import annotations

import json

import numpy as np


def metric(d, path, default=None):
    """d['a']['b'] for path 'a/b' (numbers as float), `default` when missing."""
    for k in path.split("/"):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return float(d) if isinstance(d, (int, float, np.floating, np.integer)) else d



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
        v["resume: killed mid-run after a checkpoint"] = (bool(r.get("killed_mid_run"))
                                                          and r.get("kill_returncode") == -9)
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


