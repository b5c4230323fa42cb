"""OPID's learning test: Signpost houses whose doors only a hindsight skill knows, from a base that reads skills.

    python -m tuned_examples.signpost_skills --preset grpo,opid --seeds 0 [--as-test] [--json OUT] [--plot PNG]
    opid-gap --example signpost_skills           # the base's self-teacher gap (opid_rllib/eval/gap.py)

The setting (`ENV_CONFIG`): the task is a house of four rooms with six doors; one door colour opens every room of it,
no sign shows which, and the observation names house and room ("House 1. Room 2 of 4."). A wrong door opens onto
the next room too but loses the episode, so every episode has one step per room and step t is room t + 1 in the
student's and the teacher's play alike. Chance is (1/6)^4 = 0.08 %: the groups of 8 start all-failed, where GRPO's
outcome advantage is zero, and only OPID's dense term says anything. The hindsight analyzer reads the door from the
finished episode (the env's expert plan): a step skill at each step that left the plan ("At this point, open blue
door."), the episode skill (naming the door too) at the others.

Why this shape (measured, docs/LEARNING_GATE.md): with one optimizer step per iteration, tens of iterations move a
preference (rung 0's fixed red door) but did not build a house- or room-conditioned lookup: with two houses or a door
per room, neither GRPO nor OPID learned in 20 iterations. With four doors and three rooms (chance 1.6 %) GRPO's rare
successes were enough and both arms learned alike. So one house, one door, and a chance low enough that GRPO sees no
success in its budget; the pool is one task, hence no shuffled-skills control here (its donors must be another task).

The base (`warm_start`): behaviour cloning of the tiny model on houses 100-999 with every door opening (a uniform pick
per room, so the base prefers no door). First a copy stage: samples whose step skill ("At this point, open X door.")
or episode skill (the hindsight analyzer's text for a random play of a house whose door is X) names a door X and whose
target is X, so the skill is the only source of the answer, which is what makes a model read a skill (docs/STUDIES.md,
hint-following samples); then a mixed stage of plain demos with such copies. `hint_share` scales the skill samples: 0
gives a base that never saw a skill, 1 one that reads the named door (its self-teacher wins 94 % where it wins 0 %,
`opid-gap --example signpost_skills`). The prompt shows no history (history_length 0): the observation names house
and room, and the prompts stay short enough for the copy to form in a few minutes.

`--as-test` exits 1 unless, on every seed, OPID reaches `TARGET` (mean of the last `WINDOW` iterations' training
success) within `--stop-iters` and in at most `ITERS_RATIO` x GRPO's iterations (GRPO's budget if it never does);
tests/learning runs the same `run()`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from pathlib import Path

from tuned_examples.signpost_rung0 import report, train_until_target

ENV_CONFIG = {"signs": "hidden", "houses": True, "same_door": True, "wrong_door_leads_on": True, "n_rooms": 4,
              "n_doors": 6, "n_marks": 0}
# The training pool: one house (its door: blue), outside the warm start's houses.
HOUSES = ["signpost-train-1"]
SETTINGS = dict(group_size=8, tasks_per_iter=4, max_steps=4, history_length=0, max_new_tokens=16,
                max_prompt_len=512, micro_batch_size=32, score_micro_batch_size=32, lr=2e-4,
                analyzer_num_workers=1, torch_threads=1, train_task_ids=HOUSES)
# OPID as the paper writes it (raw Delta, critical-first routing) at rung 0's weights, step skills that do not quote
# the sampled command.
OPID_SETTINGS = dict(episode_skill_adv_weight=0.1, step_skill_adv_weight=0.1,
                     analyzer_config={"quote_sampled": False})
TARGET, WINDOW, STOP_ITERS, ITERS_RATIO = 0.9, 3, 30, 0.5
# The warm start: copy_samples skill samples at hint share 1 (113 steps of 16, half step and half episode skills, lr
# 1e-3 constant: on four-door prompts the copy formed at 50-125 steps, bench/signpost_copy_probe.py's plateau), then
# one epoch over `tasks` houses' plain demos, each step also copied with a step skill (probability mix_hint_prob x
# the hint share) and with an episode skill (mix_episode_prob x the share). With half of the samples plain from the
# start the copy had not formed after 200 steps; after the copy stage a 60 % plain mix kept it (P(named door) 0.996).
WARM_START = dict(tasks=300, copy_samples=1800, copy_epochs=1, mix_hint_prob=0.6, mix_episode_prob=0.3, lr=1e-3,
                  batch_size=16, seed=0, first_house=100)


def _door(rng) -> str:
    from envs.signpost.env import COLOURS, command

    return command(COLOURS[int(rng.integers(ENV_CONFIG["n_doors"]))])


def hint_demo(d, rng):
    """A copy of demo `d` whose step skill names a random door X and whose target is X (the skill is the only source
    of the answer)."""
    from dataclasses import replace

    from envs.signpost.env import HOUSE_TASK
    from opid_rllib.prompts import insert_skills
    from opid_rllib.sft.demo_skills import step_skill_text
    from opid_rllib.sft.responses import checked_response

    x = _door(rng)
    response, action = checked_response("signpost", task=HOUSE_TASK, action=x, style="action")
    skill = step_skill_text("signpost", x)
    return replace(d, prompt=insert_skills(d.base_prompt, step_skill=skill), response=response, action=action,
                   step_skill=skill, episode_skill=None, hint_follow=True)


def episode_demo(d, env, analyzer, rng):
    """A copy of demo `d` whose episode skill is the hindsight analyzer's text for a uniform play of another house, and
    whose target is the door that skill names (every room of a house opens on one door, so the skill names one)."""
    from dataclasses import replace

    from envs.signpost.env import HOUSE_TASK
    from opid_rllib.prompts import insert_skills
    from opid_rllib.sft.responses import checked_response

    episode, door = _random_play_skill(env, analyzer, rng)
    response, action = checked_response("signpost", task=HOUSE_TASK, action=door, style="action")
    return replace(d, prompt=insert_skills(d.base_prompt, episode_skill=episode), episode_skill=episode,
                   step_skill=None, response=response, action=action, hint_follow=True)


def base_demos(hint_share: float, seed: int = 0) -> tuple[list, list]:
    """(copy-stage demos, mixed-stage demos) of the warm start (module doc)."""
    import numpy as np

    import envs
    from opid_rllib.analyzer import HindsightAnalyzer
    from opid_rllib.sft.demos import collect_demonstrations

    ws = WARM_START
    rng = np.random.default_rng([seed, 31337])
    first = ws["first_house"]
    n_copy = int(round(hint_share * ws["copy_samples"]))
    ids = [f"signpost-train-{first + i}" for i in range(ws["tasks"] + -(-n_copy // SETTINGS["max_steps"]))]
    demos = collect_demonstrations(  # every door opens: the demonstrated door is a uniform pick per room
        "signpost", task_ids=ids, num_tasks=len(ids), history_length=SETTINGS["history_length"],
        max_steps=SETTINGS["max_steps"], seed=seed, skill_fraction=0.0,
        env_kwargs=dict(ENV_CONFIG, signs=False, wrong_door_leads_on=False, same_door=False), response_style="action")
    plain, extra = demos[: ws["tasks"] * SETTINGS["max_steps"]], demos[ws["tasks"] * SETTINGS["max_steps"]:]
    env = envs.make("signpost", **dict(ENV_CONFIG, max_steps=SETTINGS["max_steps"]))
    analyzer = HindsightAnalyzer(quote_sampled=False)
    copy_stage = [hint_demo(d, rng) if k % 2 == 0 else episode_demo(d, env, analyzer, rng)
                  for k, d in enumerate(extra[:n_copy])]
    mixed = list(plain)
    for d in plain:
        if rng.random() < hint_share * ws["mix_hint_prob"]:
            mixed.append(hint_demo(d, rng))
        if rng.random() < hint_share * ws["mix_episode_prob"]:
            mixed.append(episode_demo(d, env, analyzer, rng))
    env.close()
    return copy_stage, mixed


def _random_play_skill(env, analyzer, rng) -> tuple[str, str]:
    """(the episode skill the hindsight analyzer writes for a uniform play of a random house 500..999, that house's
    door)."""
    from opid_rllib.analyzer import StepRecord, TrajectoryRecord

    tid = f"signpost-train-{int(rng.integers(500, 1000))}"
    obs, info = env.reset(options={"task_id": tid})
    door = info["expert_actions"][0]
    steps, done, won = [], False, False
    while not done:
        adm = list(info["admissible_actions"])
        a = adm[int(rng.integers(len(adm)))]
        nobs, r, term, trunc, ninfo = env.step(a)
        steps.append(StepRecord(index=len(steps), observation=obs, response=f"<action>{a}</action>", action=a,
                                action_valid=True, reward=float(r), admissible_actions=adm,
                                expert_actions=list(info["expert_actions"])))
        obs, info, done, won = nobs, ninfo, term or trunc, bool(ninfo.get("won"))
    traj = TrajectoryRecord(traj_id=tid, group_id=tid, task_id=tid, task=info["task"], task_type=info["task_type"],
                            env_name="signpost", success=won, episode_reward=sum(s.reward for s in steps), steps=steps)
    return analyzer.analyze(traj).episode_skill, door


def warm_start(hint_share: float = 1.0, cache_dir: str | os.PathLike | None = None, log=print) -> Path:
    """The base (module doc) for one `hint_share`, built once per cache folder and recipe: a copy stage (hint samples
    only, constant lr: the copy forms after a plateau that a mixed or decaying stage can outlast), then a mixed stage
    (uniform plain demos, hint and episode-skill copies) from which the base picks doors at chance."""
    from opid_rllib.models import resolve_model
    from opid_rllib.models.cache import _build_cached, default_cache_dir
    from opid_rllib.sft.train import train_sft

    ws = WARM_START
    tiny = resolve_model("tiny")
    copy_stage, mixed = base_demos(float(hint_share), ws["seed"])
    key = hashlib.sha256(json.dumps([ws, tiny.name, [(d.prompt, d.response) for d in copy_stage + mixed]],
                                    sort_keys=True).encode()).hexdigest()[:8]
    common = dict(batch_size=ws["batch_size"], max_prompt_len=SETTINGS["max_prompt_len"], seed=ws["seed"], log=None,
                  progress_every_s=10.0 if log else -1)

    def build(tmp: Path) -> None:
        if log:
            log(f"[signpost-skills] building the base (hint share {hint_share:g}): {len(copy_stage)} copy-stage and "
                f"{len(mixed)} mixed demos (1-3 min on one core, once per cache)")
        start = tiny
        if copy_stage:
            start = train_sft(tiny, copy_stage, tmp / "copy_stage", epochs=ws["copy_epochs"], lr=ws["lr"],
                              lr_schedule="constant", **common)
        train_sft(start, mixed, tmp, epochs=1, lr=ws["lr"], **common)

    return _build_cached(Path(cache_dir or default_cache_dir()) / "models" / f"signpost-skills-{key}", build)


def make_config(preset: str, model: str | os.PathLike, seed: int, **overrides):
    from opid_rllib.algorithm import OPIDConfig
    from opid_rllib.presets import apply_preset

    settings = {**SETTINGS, "llm_model": str(model), **(OPID_SETTINGS if preset != "grpo" else {}), **overrides}
    cfg = OPIDConfig().environment("signpost", env_config=dict(ENV_CONFIG, max_steps=settings["max_steps"]))
    return apply_preset(cfg, preset, **settings).debugging(seed=seed)


# The tuned examples' `config` (tests/algo/test_config.py validates every one): OPID on the model in $OPID_MODEL.
config = make_config("opid", os.environ.get("OPID_MODEL", "tiny"), seed=0)


def gap_setup(hint_share: float = 1.0) -> tuple:
    """(config, task ids) for `opid-gap --example signpost_skills`: OPID's config on the base, the pool's houses."""
    return make_config("opid", warm_start(hint_share), seed=0), [h for h in HOUSES for _ in range(64 // len(HOUSES))]


def run(preset: str, model, seed: int, stop_iters: int = STOP_ITERS, log=print, run_dir=None, **overrides) -> dict:
    """Train until the last WINDOW iterations' mean success reaches TARGET or stop_iters; the curve and when."""
    cfg = make_config(preset, model, seed, **overrides)
    if run_dir is not None:
        cfg.analyzer_settings(run_dir=str(run_dir))
    gaps, skill, outcome = [], [], []

    def observe(result):
        gaps.append(_sampler_gap(result))
        skill.append(_skill_stats(result))
        outcome.append(_outcome_signal(result))

    curve, reached, seconds = train_until_target(cfg, f"[signpost-skills] {preset} seed {seed}", stop_iters, log,
                                                 on_result=observe, target=TARGET)
    gaps = [g for g in gaps if g is not None]
    return {"preset": preset, "seed": seed, "overrides": {k: v for k, v in overrides.items() if k != "analyzer_config"},
            "curve": curve, "iters_to_target": reached, "seconds": seconds,
            "max_sampler_gap": max(gaps) if gaps else None, "skill": skill,
            "misrouted_steps": sum(int(x.get("misrouted", 0)) for x in skill), "outcome_signal": outcome}


def _skill_stats(result) -> dict:
    """Per iteration: Delta per token on the step-skill rows (off the plan) and the episode-skill rows (on it), and
    the rows critical-first routing must never produce here (module doc: every step that left the plan has a step
    skill, every other an episode skill): step skills on on-plan steps, episode skills on off-plan ones."""
    o = result.get("learners", {}).get("opid", {})
    step, ep = o.get("delta_step", {}), o.get("delta_ep", {})

    def finite(v):  # an iteration without such rows logs nothing (or NaN)
        return float(v) if v is not None and math.isfinite(float(v)) else None

    out = {"step_off_plan": finite(step.get("off_plan_token_mean")),
           "episode_on_plan": finite(ep.get("on_plan_token_mean")),
           "misrouted": int(finite(step.get("on_plan_steps")) or 0) + int(finite(ep.get("off_plan_steps")) or 0)}
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items() if v is not None}


def _outcome_signal(result) -> float | None:
    """adv/outcome_abs_mean of one result: GRPO's whole advantage per response token. 0 when every group's episodes
    scored alike (here: all failed, the base's start), where GRPO's policy term has nothing to push."""
    v = result.get("learners", {}).get("opid", {}).get("adv", {}).get("outcome_abs_mean")
    return None if v is None else float(v)  # unrounded: the learning test asks for exact zeros


def _sampler_gap(result) -> float | None:
    """opid/sampler/logp_gap_max of one result (None unless the learner recomputed log pi_old): how far the re-score's
    log pi_old(y | x) lies from the log-probs the sampler reported for the same tokens."""
    gap = result.get("learners", {}).get("opid", {}).get("sampler", {}).get("logp_gap_max")
    return None if gap is None else float(gap)


def curve_area(curve: list[float], budget: int) -> float:
    """Mean success over `budget` iterations, in points; a run stopped at the target holds its last window's mean."""
    if not curve:
        return 0.0
    tail = sum(curve[-WINDOW:]) / len(curve[-WINDOW:])
    full = list(curve) + [tail] * max(0, budget - len(curve))
    return 100.0 * sum(full[:budget]) / budget


def iters_ratio(opid: dict, grpo: dict, budget: int) -> float:
    """OPID's iterations to the target over GRPO's; a run that never reaches it counts its budget."""
    return (opid["iters_to_target"] or budget) / (grpo["iters_to_target"] or budget)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="grpo,opid", help="comma-separated presets, each on every seed")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--stop-iters", type=int, default=STOP_ITERS)
    ap.add_argument("--hint-share", type=float, default=1.0, help="the base's share of skill samples (module doc)")
    ap.add_argument("--as-test", action="store_true", help="exit 1 unless OPID beats GRPO as the module doc says")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    import ray

    from opid_rllib.cli.run_log import ray_session_dir
    from opid_rllib.quiet import quiet_ray_start

    model = warm_start(args.hint_share)
    quiet_ray_start()
    print(f"[signpost-skills] Ray's logs: "
          f"{ray_session_dir(ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True))}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    runs = [run(p.strip(), model, s, args.stop_iters) for p in args.preset.split(",") for s in seeds]
    by = {(r["preset"], r["seed"]): r for r in runs}
    ratios = {s: iters_ratio(by[("opid", s)], by[("grpo", s)], args.stop_iters)
              for s in seeds if ("opid", s) in by and ("grpo", s) in by}
    ok = bool(ratios) and all(by[("opid", s)]["iters_to_target"] and v <= ITERS_RATIO for s, v in ratios.items())
    command = "python -m tuned_examples.signpost_skills " + " ".join(sys.argv[1:] if argv is None else argv)
    summary = {"target": TARGET, "window": WINDOW, "stop_iters": args.stop_iters, "env_config": ENV_CONFIG,
               "settings": SETTINGS, "hint_share": args.hint_share, "command": command, "runs": runs,
               "opid_iters_ratio": ratios, "passed": ok}
    report(summary, args.json, args.plot, "signpost-skills")
    return 0 if ok or not args.as_test else 1


if __name__ == "__main__":
    sys.exit(main())
