"""Rung 0 of the learning gate: the RL loop learns Signpost with the tiny model on 2 CPU cores, in minutes.

    python tuned_examples/signpost_rung0.py --preset grpo --seeds 0,1,2 --as-test [--json OUT]
    python tuned_examples/signpost_rung0.py --preset grpo,opid --seeds 0,1,2 --json bench/results/learning_rung0.json

The base is a format-only warm start, built once and cached: behaviour cloning on Signpost rooms without
signs, where every door opens and the demonstrated door is a uniform pick (half of the games with skills in
their prompts, so that OPID's skill prompts are text the base has seen), so the base writes well-formed
commands and opens each door about equally often (per room 1 / 4; the episode, two rooms in three steps,
about 16 %). In this recipe the sign names the red door in every room (`fixed_sign`): learning it needs no
reading, only the outcome signal, which is what this rung checks (RLlib's CartPole). Reading a sign that
changes from room to room is a copy the 3M-parameter model does not learn in minutes even from labels
(`python -m bench.signpost_copy_probe`, docs/LEARNING_GATE.md), so rung 0 does not ask for it.

`--as-test` exits 1 unless every seed's success (training rollouts, T 1.0; mean of the last `WINDOW`
iterations) reaches `TARGET` within `--stop-iters` iterations, as RLlib's tuned examples do; tests/learning
runs the same `run()`, and a broken loop fails them (docs/LEARNING_GATE.md). Runs in-process (`algo.train()`, no
Tune), one Ray session.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

# The sign names this door in every room; no graffiti (distractor colours) in the observation.
ENV_CONFIG = {"fixed_sign": "red", "n_marks": 0}
# Rollout and learner sizes: 4 tasks x 8 copies, about 5 s an iteration on one core. lr 2e-4: at 3e-4 one seed's
# policy fell into a degenerate response in one AdamW step at iteration 6 (docs/LEARNING_GATE.md).
SETTINGS = dict(group_size=8, tasks_per_iter=4, max_steps=3, history_length=2, max_new_tokens=16,
                max_prompt_len=512, micro_batch_size=32, score_micro_batch_size=32, lr=2e-4,
                analyzer_num_workers=1, torch_threads=1)
# OPID as the paper writes it (raw Delta, critical-first routing), step skills that do not quote the sampled
# command, and weights large enough to show on this scale (the reference's 0.001 is for 3B models).
OPID_SETTINGS = dict(episode_skill_adv_weight=0.1, step_skill_adv_weight=0.1,
                     analyzer_config={"quote_sampled": False})
TARGET, WINDOW, STOP_ITERS = 0.9, 3, 30
# The format-only warm start: 200 sign-free games, 2 epochs (about 30 s). Half of the games carry skills in their
# prompts (naming the demonstrated door) so that an inserted skill section is text the base has seen: without them
# every skill prompt lowered every token (Delta -0.4 to -0.6 per token, on-plan steps included) and OPID's term
# pushed the format down until the policy wrote no command (docs/LEARNING_GATE.md).
WARM_START = dict(tasks=200, epochs=2, lr=3e-3, batch_size=8, seed=0, skill_fraction=0.5)
# Seconds between the warm start's progress lines (stderr): its first build took 25 s in silence.
PROGRESS_EVERY_S = 8.0


def warm_start(cache_dir: str | os.PathLike | None = None, log=print) -> Path:
    """The format-only base (see the module doc), built once per cache folder and its recipe; a first build says so
    (`log`) and prints a progress line at least every PROGRESS_EVERY_S seconds while it trains."""
    from opid_rllib.models import resolve_model
    from opid_rllib.models.cache import _build_cached, default_cache_dir
    from opid_rllib.sft.demos import collect_demonstrations
    from opid_rllib.sft.train import train_sft

    tiny = resolve_model("tiny")
    demos = collect_demonstrations(  # about 1 s; their text keys the cache entry
        "signpost", num_tasks=WARM_START["tasks"], history_length=SETTINGS["history_length"],
        max_steps=SETTINGS["max_steps"], seed=WARM_START["seed"], skill_fraction=WARM_START["skill_fraction"],
        env_kwargs={"signs": False}, response_style="action")
    key = hashlib.sha256(json.dumps([WARM_START, tiny.name, [(d.prompt, d.response) for d in demos]],
                                    sort_keys=True).encode()).hexdigest()[:8]
    def build(tmp: Path) -> None:
        if log:
            log(f"[rung0] building the format-only warm start once ({WARM_START['tasks']} games x "
                f"{WARM_START['epochs']} epochs, about 30 s; cached in {final})")
        train_sft(tiny, demos, tmp, epochs=WARM_START["epochs"], lr=WARM_START["lr"],
                  batch_size=WARM_START["batch_size"], max_prompt_len=SETTINGS["max_prompt_len"],
                  seed=WARM_START["seed"], progress_every_s=PROGRESS_EVERY_S if log else -1, log=None)

    # The model cache's own builder: a temp sibling renamed into place, a racing build tolerated, a failed one removed.
    final = Path(cache_dir or default_cache_dir()) / "models" / f"signpost-format-{key}"
    return _build_cached(final, build)


def make_config(preset: str, model: str | os.PathLike, seed: int, **overrides):
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import apply_preset

    settings = dict(SETTINGS, llm_model=str(model), **(OPID_SETTINGS if preset != "grpo" else {}), **overrides)
    cfg = OPIDConfig().environment("signpost", env_config=dict(ENV_CONFIG, max_steps=settings["max_steps"]))
    if settings.get("rollout_staleness"):  # pipelined iterations sample on a remote runner (opid_rllib/pipeline.py)
        cfg.env_runners(num_env_runners=1)
    return apply_preset(cfg, preset, **settings).debugging(seed=seed)


# The tuned examples' `config` (tests/algo/test_config.py validates every one): GRPO on the model in $OPID_MODEL;
# the script itself trains from `warm_start()`, which this import does not build.
config = make_config("grpo", os.environ.get("OPID_MODEL", "tiny"), seed=0)


def run(preset: str, model, seed: int, stop_iters: int = STOP_ITERS, log=print, run_dir=None, **overrides) -> dict:
    """Train until the last WINDOW iterations' mean success reaches TARGET or stop_iters; the curve and when.
    run_dir: where the algorithm's logs and skill dumps go (None: RLlib's ~/ray_results/<date>)."""
    cfg = make_config(preset, model, seed, **overrides)
    if run_dir is not None:
        cfg.analyzer_settings(run_dir=str(run_dir))
    kl_old = []
    curve, reached, seconds = train_until_target(
        cfg, f"[rung0] {preset} seed {seed}", stop_iters, log,
        on_result=lambda r: kl_old.append(float(r["learners"]["default_policy"]["approx_kl_old"])))
    # One optimizer step per iteration, taken after every row is scored: pi_theta = pi_old there, so the PPO ratio
    # must be 1 (0.5 (log r)^2 ~ 0); a loop that feeds the loss wrong old log-probs shows here even if it learns.
    return {"preset": preset, "seed": seed, "curve": curve, "iters_to_target": reached,
            "max_approx_kl_old": max(kl_old), "seconds": seconds}


def train_until_target(cfg, label: str, stop_iters: int, log=print, on_result=None, target: float = TARGET):
    """Build `cfg`'s algorithm and train until the last WINDOW iterations' mean training success reaches `target` or
    stop_iters; (curve, the iteration it was reached or None, seconds). on_result(result) sees every iteration."""
    algo = cfg.build_algo()
    curve, reached, t0 = [], None, time.perf_counter()
    try:
        for it in range(1, stop_iters + 1):
            result = algo.train()
            curve.append(float(result["opid"]["success_rate"]))
            if on_result is not None:
                on_result(result)
            mean = sum(curve[-WINDOW:]) / len(curve[-WINDOW:])
            if log:
                log(f"{label} iter {it}: success {curve[-1]:.3f} (last {WINDOW}: {mean:.3f}), "
                    f"{time.perf_counter() - t0:.0f}s")
            if len(curve) >= WINDOW and mean >= target:
                reached = it
                break
    finally:
        algo.stop()
    return curve, reached, round(time.perf_counter() - t0, 1)


def plot_curves(runs: list[dict], path: str) -> None:
    """Training success per iteration, one line per preset and seed, with the target."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[rung0] no plot: matplotlib is not installed (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for r in runs:
        ax.plot(range(1, len(r["curve"]) + 1), r["curve"], marker=".", label=f"{r['preset']} seed {r['seed']}")
    ax.axhline(TARGET, color="grey", linestyle="--", linewidth=1, label=f"target ({WINDOW}-iteration mean)")
    ax.set(xlabel="training iteration", ylabel="success (training rollouts)", ylim=(0, 1.02),
           title="Signpost, rung 0 of the learning gate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"[rung0] wrote the success curve to {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="grpo", help="grpo | opid | any preset (opid_rllib/presets.py); "
                    "comma-separated: each one on every seed")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds, each one run")
    ap.add_argument("--stop-iters", type=int, default=STOP_ITERS)
    ap.add_argument("--rollout-staleness", type=int, default=0,
                    help="pipelined iterations (1: a remote runner samples the next batch during the update)")
    ap.add_argument("--as-test", action="store_true", help="exit 1 unless every seed reaches the target")
    ap.add_argument("--json", default=None, help="write the curves here")
    ap.add_argument("--plot", default=None, help="draw the success curves into this PNG (needs matplotlib)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    import ray

    from opid_rllib.cli.run_log import ray_session_dir
    from opid_rllib.quiet import quiet_ray_start

    model = warm_start()
    quiet_ray_start()
    print(f"[rung0] Ray's logs for this session: "
          f"{ray_session_dir(ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True))}")
    out = Path(args.json or args.plot).parent if (args.json or args.plot) else None  # else ~/ray_results/<date>
    staleness = {"rollout_staleness": args.rollout_staleness} if args.rollout_staleness else {}
    runs = [run(p.strip(), model, s, args.stop_iters, run_dir=out and out / f"{p.strip()}-seed{s}", **staleness)
            for p in args.preset.split(",") for s in seeds]
    if out is not None:
        print(f"[rung0] wrote each run's skill dumps under {out}/<preset>-seed<N>/")
    ok = all(r["iters_to_target"] is not None for r in runs)
    command = "python tuned_examples/signpost_rung0.py " + " ".join(sys.argv[1:] if argv is None else argv)
    summary = {"target": TARGET, "window": WINDOW, "stop_iters": args.stop_iters, "env_config": ENV_CONFIG,
               "settings": SETTINGS, "command": command, "runs": runs, "passed": ok}
    report(summary, args.json, args.plot, "rung0")
    return 0 if ok or not args.as_test else 1


def report(summary: dict, json_path: str | None, plot_path: str | None, tag: str) -> None:
    """Write the summary to `json_path`, draw its runs' curves to `plot_path`, print when each run reached the target."""
    runs = summary["runs"]
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(summary, indent=1) + "\n")
        print(f"[{tag}] wrote the curves to {json_path}")
    if plot_path:
        plot_curves(runs, plot_path)
    for r in runs:
        when = f"reached at iteration {r['iters_to_target']}" if r["iters_to_target"] else "NOT reached"
        print(f"[{tag}] {r['preset']} seed {r['seed']}: target {when} ({r['seconds']} s)")


if __name__ == "__main__":
    sys.exit(main())
