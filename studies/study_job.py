"""One job of a learning study (studies/learning.py): train a variant from a warm start, checkpointed every iteration,
then play the panel with its policy in a fresh child process; also the base's oracle play (the teacher table).

Kept apart from studies/learning.py, which decides which jobs run, caches them and reports them: the pieces here are
what studies/play_after_training.py and bench/dtype_speed.py reuse to time or re-make one job exactly as a study does.
"""

from __future__ import annotations

import json
import os
import time

from opid_rllib.models.fingerprint import weights_fingerprint

SHORTHANDS = {"w": ("episode_skill_adv_weight", "step_skill_adv_weight"), "w_ep": ("episode_skill_adv_weight",),
              "w_step": ("step_skill_adv_weight",)}
# A play's finished chunks of games, in the job's (ignored) run folder: a play cut short goes on from them.
PLAY_CHUNKS = "play_chunks.jsonl"
# Per-iteration learner metrics kept for the Delta / advantage-scale analysis (learners/opid/...).
KEPT = ("delta_ep", "delta_step", "adv", "teacher_samples", "routed_episode_ratio", "routed_step_ratio",
        "analysis_failed_trajectories", "analysis_trajectories")


def parse_variant(spec: str) -> tuple[str, dict]:
    """'opid:w=0.1+lr=3e-4' -> ('opid', {episode_skill_adv_weight: 0.1, step_skill_adv_weight: 0.1, lr: 3e-4})."""
    from opid_rllib.presets import PRESETS

    name, _, rest = spec.partition(":")
    if name not in PRESETS:
        raise SystemExit(f"--variants: {name!r} is not a preset; choose from {sorted(PRESETS)}")
    over: dict = {}
    for item in filter(None, rest.split("+")):
        key, eq, val = item.partition("=")
        if not eq:
            raise SystemExit(f"--variants: {item!r} in {spec!r} must be key=value")
        if val.lower() in ("true", "false"):
            value = val.lower() == "true"
        else:
            try:
                value = int(val) if val.lstrip("-").isdigit() else float(val)
            except ValueError:
                from opid_rllib.settings import OPID_DEFAULTS

                if key.startswith("analyzer.") or OPID_DEFAULTS.get(key, (None, None))[1] is not str:
                    raise SystemExit(f"--variants: {item!r}: value must be a number or true/false") from None
                value = val  # a word setting (e.g. invalid_action_source=env); OPIDConfig names a bad choice
        if key.startswith("analyzer."):
            over.setdefault("analyzer_config", {})[key[len("analyzer."):]] = value
            continue
        for k in SHORTHANDS.get(key, (key,)):
            over[k] = value
    return name, over


def sizes(args) -> dict:
    from opid_rllib.presets import CPU_TINY

    return dict(CPU_TINY, max_steps=args.max_steps, history_length=args.history_length,
                tasks_per_iter=args.tasks_per_iter, group_size=args.group_size, max_prompt_len=args.max_prompt_len,
                max_new_tokens=args.max_new_tokens, lr=args.lr, minibatch_size=args.minibatch_size, dtype=args.dtype,
                **({"micro_batch_size": args.micro_batch_size} if args.micro_batch_size else {}))


def play_kwargs(path: str, args, **kw) -> dict:
    """evaluate()'s keywords for a play of `path` with the bench's rollout settings (panel, seed, skills in kw)."""
    return dict(progress=False, batch_envs=args.batch_envs, temperature=args.eval_temperature, llm_model=path,
                max_steps=args.eval_max_steps, history_length=args.history_length,
                max_new_tokens=args.max_new_tokens, max_prompt_len=args.max_prompt_len, dtype=args.dtype,
                env_kwargs=args.env_config, **kw)


def _play_panel(path: str, args, **kw) -> dict:
    """opid-eval's evaluate() with play_kwargs' settings, played in a fresh child process (spawned; one at a time, for
    the play's length only). Why: on an AVX-512 Xeon a SmolLM2 play in the process that had just trained ran at about
    half speed (3.66 s a step, against 1.97 for the next chunk of the same play in a fresh process; docs/STUDIES.md,
    cause not found); the child starts with none of what training left in this process, and plays the same games (same
    weights, settings, seeds and torch threads; checked by tests/studies/test_resume.py and
    studies/play_after_training.py)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import torch

    from opid_rllib.eval.panel import evaluate

    threads = getattr(args, "torch_threads", None) or torch.get_num_threads()
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                             initializer=torch.set_num_threads, initargs=(threads,)) as child:
        return child.submit(evaluate, **play_kwargs(path, args, **kw)).result()


def evaluate_policy(path: str, seed: int, args, chunks: str | None = None) -> dict:
    """The panel's table, plus which games were won (task id -> won): two arms that played with the same seed are
    then compared game by game (learning_report.per_game), not only by their two success rates. chunks: where the
    play keeps its finished chunks of games, so that a play cut short goes on from there (opid-eval --resume);
    then `resumed_play_s` holds the play time of the chunks read back (the callers pop it into their timing)."""
    kw = {"chunk_log": chunks, "resume": True} if chunks else {}
    ev = _play_panel(path, args, panel=args.eval_panel, episodes=args.eval_episodes, seed=seed, **kw)
    out = {**ev["table"], "won_by_task": {str(r["task_id"]): bool(r["won"]) for r in ev["episodes"]}}
    if chunks:
        out["resumed_play_s"] = ev["timing"]["resumed_play_s"]["student"]
    return out


def base_headroom(path: str, args, weights: str | None = None) -> dict:
    """The base's oracle play on --headroom-panel (seed 0), or --headroom-results: opid-eval's results.json of
    that same play, or the record studies/smollm2_headroom.sh's RESULTS= kept of it (under "play"), read instead of
    playing the panel twice (refused where its settings differ). `weights`: the base's weights_fingerprint where
    the caller has it (hashing SmolLM2's 538 MB again costs seconds)."""
    if args.headroom_results:
        with open(args.headroom_results) as f:
            ev = json.load(f)
        ev = ev.get("play", ev)
        want = {"panel": args.headroom_panel, "skills": "oracle", "seed": 0, "temperature": args.eval_temperature,
                "max_steps": args.eval_max_steps, "history_length": args.history_length,
                "max_new_tokens": args.max_new_tokens, "max_prompt_len": args.max_prompt_len, "dtype": args.dtype}
        got = ev.get("config", {})
        bad = [f"{k}: {got.get(k)!r} (this run: {v!r})" for k, v in want.items() if got.get(k) != v]
        played_env = got.get("env_config", {})
        bad += [f"env_config[{k!r}]: {played_env.get(k)!r} (this run: {v!r})" for k, v in args.env_config.items()
                if played_env.get(k) != v]
        played_weights = got.get("model_weights")
        if played_weights is None:  # a play made before opid-eval recorded them: nothing to check it by
            print(f"[learning] --headroom-results {args.headroom_results}: the play does not record its model's "
                  f"weights; taken as --base's ({got.get('model')})", flush=True)
        else:
            ours = weights or weights_fingerprint(path)
            if played_weights != ours:
                bad.append(f"model_weights: {played_weights} (this run's --base {path}: {ours})")
        if bad:
            raise SystemExit(f"--headroom-results {args.headroom_results}: not the play --headroom-panel would make; "
                             + "; ".join(bad))
    else:
        ev = _play_panel(path, args, panel=args.headroom_panel, seed=0, skills="oracle", resume=True,
                         chunk_log=os.path.join(args.out, "runs", "base-headroom", PLAY_CHUNKS))
    return {k: ev[k] for k in ("table", "teacher_table", "headroom")}


def iteration_record(r: dict) -> dict:
    lo = r.get("learners", {}).get("opid", {})
    rec = {"train_success": float(r.get("opid", {}).get("success_rate", float("nan")))}
    for k in KEPT:
        if k in lo:
            rec[k] = lo[k]
    return rec


def study_config(base: str, spec: str, seed: int, args, run_dir: str):
    """The OPIDConfig a study trains variant `spec` with: ALFWorld's train split, the opid preset at the bench's
    sizes (`sizes(args)`), then the variant's preset and overrides (bench/dtype_speed.py times the same)."""
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import apply_preset

    name, over = parse_variant(spec)
    cfg = OPIDConfig().environment("alfworld", env_config={**args.env_config, "split": "train",
                                                                      "max_steps": args.max_steps})
    cfg = apply_preset(cfg, "opid", **dict(sizes(args), llm_model=base))
    cfg = apply_preset(cfg, name, **over).debugging(seed=seed)
    cfg.analyzer_settings(run_dir=run_dir)
    return cfg


def train_and_eval(base: str, spec: str, seed: int, args) -> dict:
    """Train variant `spec` from `base` for args.iters iterations and play the panel with its policy. Each
    iteration is checkpointed (studies/job_checkpoint.py), so a job cut short resumes at its next iteration."""
    from studies import job_checkpoint

    run_dir = run_dir_of(args, spec, seed)
    policy = os.path.join(run_dir, "policy")
    progress = job_checkpoint.trained(run_dir)
    if progress is not None:
        print(f"  [{spec} s{seed}] trained before: playing its policy", flush=True)
    else:
        progress = train_job(base, spec, seed, args, run_dir, policy)
    t1 = time.time()
    table = evaluate_policy(policy, seed, args, chunks=os.path.join(run_dir, PLAY_CHUNKS))
    eval_s = time.time() - t1 + table.pop("resumed_play_s", 0.0)  # a play over several sittings: all of them
    return {"variant": spec, "seed": seed, "iters": progress["iters"], "train_s": progress["train_s"],
            "eval_s": eval_s, "table": table}


def train_job(base: str, spec: str, seed: int, args, run_dir: str, policy: str) -> dict:
    """The job's training, from its last checkpoint where it has one; exports the policy to `policy`."""
    from studies import job_checkpoint

    algo = study_config(base, spec, seed, args, run_dir).build_algo()
    iters, spent = [], 0.0
    ckpt = job_checkpoint.latest(run_dir)
    if ckpt is not None:
        done = job_checkpoint.restore(algo, ckpt)
        iters, spent = done["iters"], done["train_s"]
        print(f"  [{spec} s{seed}] resuming after iteration {len(iters)} ({ckpt})", flush=True)
    t0 = time.time() - spent
    # result.json + TensorBoard events + skill dumps: `opid-report RUN_DIR` and TensorBoard read the run.
    from opid_rllib.cli.run_log import jsonable_result, open_tensorboard, write_tensorboard

    os.makedirs(run_dir, exist_ok=True)
    lines = []
    if iters:  # the checkpointed iterations' lines: the checkpoint's copy (older checkpoints: the run folder's)
        kept = next((p for p in (os.path.join(d, job_checkpoint.RESULTS) for d in (ckpt, run_dir))
                     if os.path.exists(p)), None)
        if kept is not None:
            with open(kept) as f:
                lines = f.readlines()[:len(iters)]
    writer = open_tensorboard(run_dir, resumed_at=len(iters))  # an iteration played again shows once
    with open(os.path.join(run_dir, job_checkpoint.RESULTS), "w") as results:
        results.writelines(lines)
        results.flush()  # on disk now, not at the next iteration's end: a cut before then would lose them there
        for i in range(len(iters), args.iters):
            r = algo.train()
            results.write(json.dumps(jsonable_result(r)) + "\n")
            results.flush()
            write_tensorboard(writer, r, i + 1)
            iters.append(dict(iteration_record(r), seconds=time.time() - t0))
            job_checkpoint.save(algo, run_dir, {"iters": iters, "train_s": time.time() - t0})
            print(f"  [{spec} s{seed}] iter {i + 1}/{args.iters}: train success {iters[-1]['train_success']:.2f} "
                  f"({iters[-1]['seconds']:.0f}s)", flush=True)
    writer.close()
    module = algo.learner_group._learner.module["default_policy"].unwrapped()
    module.model.save_pretrained(policy)
    module.tokenizer.save_pretrained(policy)
    progress = {"iters": iters, "train_s": time.time() - t0}
    algo.stop()
    job_checkpoint.mark_trained(run_dir, progress)
    return progress


def run_dir_of(args, variant: str, seed: int) -> str:
    return os.path.join(args.out, "runs", f"{variant.replace(':', '_').replace('+', '_')}-s{seed}")
