"""Part 4 of bench/faults.py (run that, not this): SIGKILL a training process mid-run, restore its
last checkpoint in a new process and check weights, iteration and task stream, then continue with
`opid-train --resume`. The child processes re-enter bench/faults.py (--_train-child/--_resume-child).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from bench.faults_report import metric

REPO = Path(__file__).resolve().parents[1]
FAULTS = [sys.executable, "-m", "bench.faults"]  # the children's entry point, run from REPO


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
        [*FAULTS, "--_train-child", "--_train-argv", json.dumps(train_argv)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=REPO)
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
    child = subprocess.run([*FAULTS, "--_resume-child", last,
                            "--_train-argv", json.dumps(train_argv)],
                           capture_output=True, text=True, timeout=args.resume_timeout_s, start_new_session=True, cwd=REPO)
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
        keep = ("resumed from", "iter ", "checkpoint:")
        res["cli_resume_lines"] = [ln[:120] for ln in out_lines if ln.startswith(keep)]
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

    from opid_rllib.cli.train import build_parser, config_from_args

    args = build_parser().parse_args(train_argv)
    cfg = config_from_args(args)
    ray.init(num_cpus=args.num_cpus or None, include_dashboard=False, ignore_reinit_error=True)
    algo = cfg.build_algo()
    while algo.iteration < args.stop_iters:
        t0 = time.time()
        res = algo.train()
        it = algo.iteration
        print(f"iter {it}: format_ok={metric(res, 'opid/format_valid_rate'):.3f} time={time.time() - t0:.1f}s",
              flush=True)
        if args.checkpoint_freq and it % args.checkpoint_freq == 0:
            print("checkpoint:", algo.save_to_path(os.path.join(args.output, f"checkpoint_{it:05d}")), flush=True)
    algo.stop()
    return 0


def resume_child(ckpt: str, train_argv: list[str]) -> int:
    """New process: restore `ckpt`, compare weights with the checkpoint file, train one iteration."""
    import ray
    import torch

    import envs
    from opid_rllib.cli.train import build_parser, config_from_args

    args = build_parser().parse_args(train_argv)
    cfg = config_from_args(args)
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    out = {}
    algo = cfg.build_algo()
    t = time.perf_counter()
    algo.restore_from_path(ckpt)
    out["restore_s"] = round(time.perf_counter() - t, 2)
    ckpt_iter = int(Path(ckpt).name.split("_")[-1])
    out["checkpoint_iteration"] = ckpt_iter
    out["restored_iteration"] = int(algo.iteration)
    # Learner module tensors vs the checkpoint file on disk, byte for byte.
    state_file = Path(ckpt) / "learner_group" / "learner" / "rl_module" / "default_policy" / "module_state.pkl"
    with open(state_file, "rb") as f:
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
    steps_after = float(metric(res, "num_env_steps_sampled_lifetime") or 0)
    out["env_steps_lifetime_before_after"] = [float(steps_before), steps_after]
    out["policy_loss_finite"] = bool(np.isfinite(metric(res, "learners/default_policy/policy_loss", float("nan"))))
    algo.stop()
    ray.shutdown()
    print("RESUME_JSON " + json.dumps(out), flush=True)
    return 0


