"""`opid-train --no-tune`: the in-process training loop, and the line that says where a run's checkpoint is."""

from __future__ import annotations

import json
import os
import time

from opid_rllib.cli.run_log import jsonable_result, open_run_logs, print_outputs, write_tensorboard


def run_no_tune(cfg, args, output) -> int:
    """In-process loop; writes TensorBoard events, result.json lines and skill dumps into `output`."""
    cfg.analyzer_settings(run_dir=output)
    print(f"[opid-train] building the algorithm: the policy in every runner and learner, {cfg.num_env_runners} remote "
          "env runners", flush=True)
    algo = cfg.build_algo()
    if args.resume:
        algo.restore_from_path(os.path.abspath(args.resume))
        print(f"resumed from {args.resume} at iteration {algo.iteration}")
    writer, results_file = open_run_logs(output, resumed_at=algo.iteration)
    last = {}
    while algo.iteration < args.stop_iters:
        t0 = time.time()
        print(f"[opid-train] iteration {algo.iteration + 1}/{args.stop_iters}: rollouts, then the learner update",
              flush=True)
        last = algo.train()
        it = algo.iteration
        write_tensorboard(writer, last, it)
        results_file.write(json.dumps(jsonable_result(last)) + "\n")
        results_file.flush()
        ev = last.get("evaluation") or {}
        shown = (f" eval_success={ev['success_rate']:.3f} ({ev['episodes']} games)"
                 if ev.get("evaluated_at_iteration") == it else "")
        print(f"iter {it}: success={get_metric(last, 'opid/success_rate'):.3f} "
              f"format_ok={get_metric(last, 'opid/format_valid_rate'):.3f}{shown} time={time.time() - t0:.1f}s",
              flush=True)
        if args.checkpoint_freq and it % args.checkpoint_freq == 0:
            print("checkpoint:", algo.save_to_path(os.path.join(output, f"checkpoint_{it:05d}")))
    if args.checkpoint_at_end:
        say_checkpoint(algo.save_to_path(os.path.join(output, "checkpoint_final")))
    writer.close()
    results_file.close()
    algo.stop()
    ckpts = "; checkpoints: checkpoint_*" if args.checkpoint_freq or args.checkpoint_at_end else ""
    print_outputs(f"{output}: result.json (a line per iteration), TensorBoard events, skill dumps in "
                  f"opid_skills/{ckpts}")
    return 0


def say_checkpoint(path) -> None:
    """One line: where the run's final policy is, and the command that exports it."""
    print(f"[opid-train] checkpoint: {path} (export the policy: opid-export {path} policy/)", flush=True)


def get_metric(d, path, default=float("nan")):
    for k in path.split("/"):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d
