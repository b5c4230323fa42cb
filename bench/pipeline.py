"""Serial against pipelined iterations (rollout_staleness 0 vs 1), side by side in one run.

    python -m bench.pipeline --iters 5 --json bench/results/pipeline.json
    python -m bench.pipeline summary --json bench/results/pipeline.json   # adds the learning runs' figures

The CPU example's sizes (CPU_TINY on its six ALFWorld games, from its warm start), 1 remote env runner and 1 remote
learner, one torch thread each. Arms, one after another (a pipelined arm keeps a batch in flight, so arms never
share the machine), each 1 warm-up iteration then --iters measured ones:
  opid_serial, opid_pipelined, grpo_serial, grpo_pipelined         the hindsight analyzer (instant)
  opid_serial_http, opid_pipelined_http                            the LLM analyzer against a real OpenAI-compatible
                                                                   HTTP server on 127.0.0.1 answering after
                                                                   --analyzer-delay-s seconds per call
Every arm uses analyzer_num_workers 8 (the package default). Figures: medians of iteration seconds, iterations per
hour and step-samples per second (the step-samples the update trained on / the iteration's wall time). Summary:
  speedup                   opid_pipelined over opid_serial, step-samples/s
  analyzer_hidden_share     1 - (pipelined_http - pipelined) / (serial_http - serial), median iteration seconds: the
                            share of the analyzer's wall time the serial loop pays that the pipeline hides
  opid_over_grpo_pipelined  opid_pipelined over grpo_pipelined, median iteration seconds
  opid_over_grpo_serial     the same for the serial loop
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

ARMS = ("opid_serial", "opid_pipelined", "grpo_pipelined", "opid_serial_http", "opid_pipelined_http", "grpo_serial")
DEFAULT_ARMS = ARMS[:5]  # grpo_serial on request (--arms): the summary needs the other five


def build(arm: str, server_url: str | None, seed: int):
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import apply_preset, cpu_example_settings
    from opid_rllib.sft.cpu_example import warm_start

    settings = dict(cpu_example_settings("alfworld"), llm_model=str(warm_start()), analyzer_num_workers=8,
                    torch_threads=1, progress_interval_s=0.0,
                    rollout_staleness=1 if "pipelined" in arm else 0)
    if arm.endswith("_http"):
        settings.update(analyzer="openai", analyzer_config={
            "base_url": server_url, "api_key_env": "OPID_BENCH_ANALYZER_KEY", "model": "fake", "timeout_s": 60.0})
    cfg = OPIDConfig().environment("alfworld", env_config={"split": "train", "max_steps": settings["max_steps"]})
    cfg = apply_preset(cfg, "opid", **settings)
    cfg = apply_preset(cfg, arm.split("_")[0])
    cfg.env_runners(num_env_runners=1).learners(num_learners=1)
    return cfg.debugging(seed=seed).build_algo()


def run_arm(arm: str, iters: int, server_url: str | None, seed: int) -> list[dict]:
    algo = build(arm, server_url, seed)
    rows = []
    try:
        for it in range(iters + 1):
            t0 = time.perf_counter()
            res = algo.train()
            wall = time.perf_counter() - t0
            learner = res.get("learners", {}).get("default_policy", {})
            row = {"seconds": wall, "step_samples": float(learner.get("num_samples", 0.0)),
                   "late_analyses": res.get("opid_pipeline", {}).get("late_analyses", 0.0),
                   "policy_lag": res.get("opid_pipeline", {}).get("policy_lag_mean", 0.0),
                   "learner_wait_s": res.get("opid_pipeline", {}).get("learner_wait_s"),
                   "runner_wait_s": res.get("opid_pipeline", {}).get("runner_wait_s"),
                   "analyzer_wait_s": res.get("env_runners", {}).get("opid_runner", {}).get("analyzer_wait_s"),
                   # S: the runner's rollout wall time for the batch trained on; U (pipelined): the update's
                   "sample_s": res.get("env_runners", {}).get("opid_runner", {}).get("sample_wall_s"),
                   "update_s": res.get("opid_pipeline", {}).get("update_s")}
            row["step_samples_per_s"] = row["step_samples"] / wall
            print(f"{arm} iteration {it}{' (warm-up)' if it == 0 else ''}: {wall:.1f} s, "
                  f"{row['step_samples']:.0f} step-samples", flush=True)
            if it > 0:
                rows.append(row)
    finally:
        algo.stop()
    return rows


def medians(rows: list[dict]) -> dict:
    sec = statistics.median(r["seconds"] for r in rows)
    return {"seconds": sec, "iterations_per_hour": 3600.0 / sec,
            "step_samples_per_s": statistics.median(r["step_samples_per_s"] for r in rows),
            "late_analyses": sum(r["late_analyses"] for r in rows)}


def summary(med: dict) -> dict:
    out = {}
    if {"opid_serial", "opid_pipelined"} <= med.keys():
        out["speedup"] = med["opid_pipelined"]["step_samples_per_s"] / med["opid_serial"]["step_samples_per_s"]
    if {"opid_pipelined", "grpo_pipelined"} <= med.keys():
        out["opid_over_grpo_pipelined"] = med["opid_pipelined"]["seconds"] / med["grpo_pipelined"]["seconds"]
    if {"opid_serial", "grpo_serial"} <= med.keys():
        out["opid_over_grpo_serial"] = med["opid_serial"]["seconds"] / med["grpo_serial"]["seconds"]
    if {"opid_serial", "opid_pipelined", "opid_serial_http", "opid_pipelined_http"} <= med.keys():
        serial_pays = med["opid_serial_http"]["seconds"] - med["opid_serial"]["seconds"]
        pipelined_pays = med["opid_pipelined_http"]["seconds"] - med["opid_pipelined"]["seconds"]
        out["analyzer_serial_pays_s"] = serial_pays
        out["analyzer_pipelined_pays_s"] = pipelined_pays
        out["analyzer_hidden_share"] = 1.0 - pipelined_pays / serial_pays if serial_pays > 0 else float("nan")
    return out


def learning_summary(rung0_serial: dict, rung0_pipelined: dict, rung1_pipelined: dict | None) -> dict:
    """rung0_iters_ratio: per preset and seed, iterations to the target pipelined over serial (None where either run
    missed it); rung1_grpo_passes: the seeds whose pipelined GRPO run passed rung 1's gate."""
    serial = {(r["preset"], r["seed"]): r["iters_to_target"] for r in rung0_serial["runs"]}
    ratios = {}
    for r in rung0_pipelined["runs"]:
        base = serial.get((r["preset"], r["seed"]))
        ratios[f"{r['preset']}_seed{r['seed']}"] = (r["iters_to_target"] / base
                                                    if base and r["iters_to_target"] is not None else None)
    out = {"rung0_iters_ratio": ratios}
    if rung1_pipelined is not None:
        out["rung1_grpo_passes"] = [r["seed"] for r in rung1_pipelined["runs"]
                                    if r["preset"] == "grpo" and r["iters_to_target"] is not None]
    return out


# Written by (each run's --json copied here; the scripts keep skill dumps next to their --json):
#   python tuned_examples/signpost_rung0.py --preset grpo,opid --seeds 0,1,2 --json X                    (serial)
#   python tuned_examples/signpost_rung0.py --preset grpo,opid --seeds 0,1,2 --rollout-staleness 1 --json X
#     (pipelined; the record is two parts, OPID seed 0 first, each run as the script's `run`)
#   python tuned_examples/alfworld_rung1.py --preset grpo --seeds S --rollout-staleness 1 --as-test --json X
LEARNING_FILES = {"rung0_serial": "bench/results/pipeline_rung0_serial.json",
                  "rung0_pipelined": "bench/results/pipeline_rung0_part*.json",
                  "rung1_pipelined": "bench/results/pipeline_rung1_seed*.json",  # one file per seed
                  "rung1_pipelined_default": "bench/results/pipeline_rung1_default_seed*.json"}


def add_learning(json_path: str) -> dict:
    """`summary`: the learning runs' figures (LEARNING_FILES, written by the rung scripts' --json) into the
    pipeline bench's summary."""
    from pathlib import Path

    out = json.loads(Path(json_path).read_text())
    runs, files = {}, {}
    for key, pattern in LEARNING_FILES.items():
        paths = sorted(glob.glob(pattern))
        if paths:  # a pattern's files: their runs together
            loaded = [json.loads(Path(f).read_text()) for f in paths]
            runs[key] = {"runs": [r for d in loaded for r in d["runs"]]}
            files[key] = paths
    out["summary"].update(learning_summary(runs["rung0_serial"], runs["rung0_pipelined"], runs.get("rung1_pipelined")))
    if "rung1_pipelined_default" in runs:  # rung 1 again with the final default (seeds 1-2)
        out["summary"]["rung1_grpo_passes_default"] = [r["seed"] for r in runs["rung1_pipelined_default"]["runs"]
                                                       if r["iters_to_target"] is not None]
        out["summary"]["rung1_default_seeds_run"] = [r["seed"] for r in runs["rung1_pipelined_default"]["runs"]]
    out["summary"]["recompute_old_logp"] = ("rung 0 and rung1_*_default: False (the pipelined default); rung 1 and the speed "
                                            "arms: True, the first default (the same forward passes; "
                                            "docs/LEARNING_GATE.md)")
    out["learning_files"] = files
    Path(json_path).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["summary"], indent=1))
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["summary"]:
        q = argparse.ArgumentParser(prog="python -m bench.pipeline summary")
        q.add_argument("--json", default="bench/results/pipeline.json")
        add_learning(q.parse_args(argv[1:]).json)
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=5, help="measured iterations per arm, after 1 warm-up (>= 5)")
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, of {ARMS}")
    p.add_argument("--analyzer-delay-s", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        p.error(f"--arms: unknown {unknown}; choose from {ARMS}")
    import ray

    from tests.analyzer.fake_openai_server import FakeOpenAIServer

    os.environ["OPID_BENCH_ANALYZER_KEY"] = "bench-key"  # before Ray starts: its workers inherit the environment
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    server = FakeOpenAIServer(delay_s=args.analyzer_delay_s).start()
    ray.init(num_cpus=4, include_dashboard=False, ignore_reinit_error=True)
    rows: dict[str, list[dict]] = {}
    try:
        for arm in arms:
            rows[arm] = run_arm(arm, args.iters, server.base_url, args.seed)
    finally:
        ray.shutdown()
        server.stop()
    med = {arm: medians(r) for arm, r in rows.items()}
    out = {"command": "python -m bench.pipeline " + " ".join(argv),
           "args": vars(args), "medians": med, "summary": summary(med), "rows": rows}
    print(f"\n{'arm':<22}{'s/iter':>8}{'iter/h':>8}{'samples/s':>11}{'late':>6}")
    for arm, m in med.items():
        print(f"{arm:<22}{m['seconds']:>8.1f}{m['iterations_per_hour']:>8.0f}{m['step_samples_per_s']:>11.2f}"
              f"{m['late_analyses']:>6.0f}")
    print(json.dumps(out["summary"], indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
