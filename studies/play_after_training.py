"""Does a panel play in the process that has just trained run slower than in a fresh one, and play the same games?

    python -m studies.play_after_training --base SFT --out runs/play_after_training   # SmolLM2: about 17 min here

Trains one GRPO iteration from --base with studies/smollm2_study.sh's settings (bf16, micro-batches of 4, lr 1e-5,
--tasks-per-iter tasks x 4 copies), then plays --episodes games of valid_unseen (in turn from each task type) three
times with the trained policy and the same seed: in this process, in studies/learning.py's spawned child (how the study plays now),
and in this process again after ray.shutdown(). It prints each play's seconds and whether all three wrote the same
responses in every game. Why: on an AVX-512 Xeon a study's play in the process that had trained ran at about half
speed (docs/STUDIES.md), so studies/learning.py now plays in a child; this measures both on the machine at hand.
"""

from __future__ import annotations

import argparse
import os
import time

from studies import study_job


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the warm start (an HF folder or a model name)")
    p.add_argument("--out", required=True)
    p.add_argument("--tasks-per-iter", type=int, default=2)
    p.add_argument("--episodes", type=int, default=16, help="valid_unseen games per play (one chunk of the study's)")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--torch-threads", type=int, default=2)
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(a.torch_threads)
    args = argparse.Namespace(max_steps=15, history_length=2, tasks_per_iter=a.tasks_per_iter, group_size=4,
                              max_prompt_len=2048, max_new_tokens=32, lr=1e-5, minibatch_size=32, dtype=a.dtype,
                              micro_batch_size=4, env_config={"expert": "sweep"}, iters=1, out=a.out, batch_envs=16,
                              torch_threads=a.torch_threads, eval_temperature=0.4, eval_max_steps=30,
                              eval_panel="alfworld/valid_unseen@v1", eval_episodes=a.episodes)
    policy = os.path.join(a.out, "policy")
    t = time.time()
    study_job.train_job(a.base, "grpo", 0, args, os.path.join(a.out, "run"), policy)
    print(f"trained one iteration: {time.time() - t:.0f} s", flush=True)

    from opid_rllib.eval.panel import evaluate

    play = dict(panel=args.eval_panel, episodes=a.episodes, seed=0)
    here_kw = study_job.play_kwargs(policy, args, **play)  # the child's play, in this process
    plays = {}
    for name, fn in (("in this process", lambda: evaluate(**here_kw)),
                     ("in studies/learning.py's child", lambda: study_job._play_panel(policy, args, **play)),
                     ("in this process after ray.shutdown()", lambda: (_shutdown(), evaluate(**here_kw))[1])):
        t = time.time()
        ev = fn()
        plays[name] = [(r["task_id"], r["won"], r["responses"]) for r in ev["episodes"]]
        print(f"{name}: {time.time() - t:.1f} s, {sum(r['length'] for r in ev['episodes'])} steps", flush=True)
    same = len({repr(g) for g in plays.values()}) == 1
    print(f"same responses in every game: {same}")
    return 0 if same else 1


def _shutdown():
    import ray

    ray.shutdown()


if __name__ == "__main__":
    raise SystemExit(main())
