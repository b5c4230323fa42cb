"""Does quoting the student's command in a step skill ("... instead of 'Y'.") make the teacher more likely to say Y?

Why: OPID's step-skill term raises each sampled token by Delta = log pi(y | x + skill) - log pi(y | x). The analyzer's
off-plan step skill quotes the sampled command itself, and a small model copies what its prompt shows; if the quote
raises Y's tokens, the skill term pushes the student toward the very command the skill tells it to leave. In the
float32 SmolLM2 study T wrote 4.6 times as many ill-formed commands on the unseen panel as GRPO
(`studies/play_phases.py`); this measures the mechanism on that play's own steps.

It replays a play's games in the env (the records hold commands, not observations; a replay whose plan disagrees
with the recorded `expert_next` is dropped and counted), and at each off-plan step (once per game and command; games
in a seeded random order) scores the recorded response under three prompts with a given policy: plain, + the
analyzer's sentence "At this point, X instead of 'Y'.", and + the same sentence without the quote "At this point,
X.". Steps are split into ill-formed commands (`play_phases.well_formed`) and well-formed ones.

`--skill episode` asks the same of the episode skill, the only skill the arm without step skills distils: each
replayed game is handed whole to the built-in hindsight analyzer (its default settings, as in training, and with
`quote_sampled=False`), and every step's response (off-plan, split as above, and on-plan) is scored plain and with
each episode skill in the prompt. The failure skill quotes wrong commands ("chose 'Y' instead of 'X'", "'Y' was
repeated"); the summary splits steps by whether the default skill quotes their command.

    python -m studies.skill_copy_probe --policy MODEL_DIR --play RUN_FOLDER [--skill step|episode]
        [--max-steps-per-kind 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from studies.play_phases import PLAY_CHUNKS, quoted_in, well_formed

from opid_rllib.eval.chunk_log import last_play


def token_logprobs(model, tokenizer, prompts: list[str], response: str, max_prompt_len: int) -> list[np.ndarray]:
    """log pi(y_l | prompt, y_<l) of the response's tokens under each prompt (the package's own layout)."""
    import torch

    from opid_rllib.prompts.chat import encode_prompts
    from opid_rllib.token_logprobs import pack, response_logprobs

    ids, _ = encode_prompts(tokenizer, prompts, max_prompt_len)
    resp = tokenizer(response, add_special_tokens=False)["input_ids"]
    b = pack(ids, [resp] * len(ids), tokenizer.pad_token_id or 0)
    with torch.no_grad():
        lp, _ = response_logprobs(model, *(torch.as_tensor(b[k]) for k in
                                         ("prompt_ids", "prompt_len", "response_ids", "response_len")))
    return [row[: len(resp)].float().numpy() for row in lp]


def divergence_token(tokenizer, response: str, action: str, plan: str) -> int | None:
    """Index of the response token where the command leaves the plan (the first differing character), or None
    where the command cannot be found in the response."""
    start = response.find(action)
    if start < 0:
        return None
    common = 0
    while common < min(len(action), len(plan)) and action[common] == plan[common]:
        common += 1
    char = start + common
    offsets = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return next((i for i, (_, end) in enumerate(offsets) if end > char), None)


def replay(env, episode: dict, *, history_length: int):
    """The played game again in the env: per step its prompt and the analyzer's StepRecord, whether the game was
    won, its ground truth, and whether the replay left the record (the recorded plan disagreed: cut there)."""
    from opid_rllib.analyzer.base import StepRecord
    from opid_rllib.prompts import build_prompt

    obs, info = env.reset(options={"task_id": episode["task_id"]})
    task, task_type = info.get("task", ""), info.get("task_type", "")
    rows: list[tuple[str, StepRecord]] = []
    history: list[tuple[str, str]] = []
    valid = episode.get("format_valid") or [True] * len(episode["actions"])
    won, truth, mismatch = False, dict(info.get("ground_truth") or {}), False
    for t, (action, response) in enumerate(zip(episode["actions"], episode["responses"])):
        plan = (info.get("expert_actions") or [None])[0]
        if plan != episode["expert_next"][t]:
            mismatch = True
            break
        prompt = build_prompt("alfworld", task=task, obs=obs, history=history,
                              admissible=list(info.get("admissible_actions", [])), step=len(history),
                              history_length=history_length)
        step = StepRecord(index=t, observation=obs, response=response, action=action, action_valid=bool(valid[t]),
                          admissible_actions=list(info.get("admissible_actions", [])),
                          expert_actions=list(info.get("expert_actions") or []))
        history.append((obs, action))  # as the env runner keeps it: the observation the command answered
        obs, reward, term, trunc, info = env.step(action)
        step.reward = float(reward)
        rows.append((prompt, step))
        if term or trunc:
            won = bool(info.get("won", False))
            truth = dict(info.get("ground_truth") or truth)
            break
    return {"rows": rows, "won": won, "ground_truth": truth, "task": task, "task_type": task_type,
            "mismatch": mismatch}


def _kind(step) -> str | None:
    plan = (step.expert_actions or [None])[0]
    if not plan:
        return None
    if step.action == plan:
        return "on_plan"
    return "well_formed" if well_formed(step.action) else "ill_formed"


def probe(model, tokenizer, episodes, *, env_kwargs, history_length: int, max_per_kind: int, max_prompt_len: int,
          skill: str = "step"):
    """Score steps of the replayed games (games in a seeded order, each command once per game) under the plain
    prompt and the skill prompt(s); `skill` is 'step' (off-plan steps: the quoted and the unquoted step skill) or
    'episode' (off-plan and on-plan steps: the episode skill the hindsight analyzer writes for the whole game)."""
    import envs
    from opid_rllib.analyzer.base import TrajectoryRecord
    from opid_rllib.analyzer.hindsight import HindsightAnalyzer
    from opid_rllib.analyzer.oracle import oracle_step_skill
    from opid_rllib.prompts import insert_skills

    if skill not in ("step", "episode"):
        raise ValueError(f"skill={skill!r}: must be 'step' or 'episode'")
    kinds = ("ill_formed", "well_formed") + (("on_plan",) if skill == "episode" else ())
    out: dict[str, list] = {k: [] for k in kinds}
    counts = {"episodes": 0, "replay_mismatch": 0}
    env = envs.make("alfworld", **env_kwargs)
    seen: set[tuple[str, str]] = set()   # a loop repeats one command: score it once per game
    quoting, unquoting = HindsightAnalyzer(), HindsightAnalyzer(quote_sampled=False)   # as training's, and without
    order = np.random.default_rng(0).permutation(len(episodes))  # all task types, not the panel's first
    for e in (episodes[i] for i in order):
        if all(len(v) >= max_per_kind for v in out.values()):
            break
        counts["episodes"] += 1
        game = replay(env, e, history_length=history_length)
        counts["replay_mismatch"] += game["mismatch"]
        if skill == "episode":
            if game["mismatch"] or not game["rows"]:
                continue   # the episode skill reads the whole game: a cut replay is not the game that was played
            traj = TrajectoryRecord(traj_id=e["task_id"], group_id=e["task_id"], task_id=e["task_id"],
                                    task=game["task"], task_type=game["task_type"], env_name="alfworld",
                                    success=game["won"], steps=[s for _, s in game["rows"]],
                                    ground_truth=game["ground_truth"])
            episode_skill = quoting.analyze(traj).episode_skill
            unquoted_skill = unquoting.analyze(traj).episode_skill
            if not episode_skill:
                continue
        steps = []
        for prompt, step in game["rows"]:
            kind = _kind(step)
            if kind not in out or len(out[kind]) >= max_per_kind or (e["task_id"], step.action) in seen:
                steps.append(step)
                continue
            seen.add((e["task_id"], step.action))
            plan = step.expert_actions[0]
            row = {"task_id": e["task_id"], "step": step.index, "action": step.action, "plan": plan,
                   "divergence": divergence_token(tokenizer, step.response, step.action, plan)
                   if kind != "on_plan" else None}
            if skill == "step":   # the analyzer's own sentences for this step, with and without the quote
                quoted = oracle_step_skill("alfworld", step, steps)
                bare = oracle_step_skill("alfworld", step, steps, quote_sampled=False)
                lp0, lpq, lpn = token_logprobs(model, tokenizer, [prompt, insert_skills(prompt, step_skill=quoted),
                                                                  insert_skills(prompt, step_skill=bare)],
                                               step.response, max_prompt_len)
                row.update(skill_quoted=quoted, skill_unquoted=bare, delta_quoted=(lpq - lp0).tolist(),
                           delta_unquoted=(lpn - lp0).tolist())
            else:
                prompts = [prompt] + [insert_skills(prompt, episode_skill=k) for k in (episode_skill, unquoted_skill)]
                lp0, lpe, lpn = token_logprobs(model, tokenizer, prompts, step.response, max_prompt_len)
                row.update(skill_episode=episode_skill, skill_episode_unquoted=unquoted_skill,
                           delta_episode=(lpe - lp0).tolist(), delta_episode_unquoted=(lpn - lp0).tolist())
            out[kind].append(row)
            steps.append(step)
    return out, counts


def summary(steps: list[dict]) -> dict:
    """Per kind of step: how the quoted and the unquoted skill move the sampled command's tokens (episode skills:
    also split by whether the quoting skill names the command)."""
    if not steps:
        return {"steps": 0}
    split = [s for s in steps if s["divergence"] is not None]
    row = {"steps": len(steps), "with_divergence": len(split)}
    keys = ("delta_quoted", "delta_unquoted", "delta_episode", "delta_episode_unquoted")
    for which in [k[len("delta_"):] for k in keys if k in steps[0]]:
        d = [np.asarray(s[f"delta_{which}"]) for s in steps]
        at = [s[f"delta_{which}"][s["divergence"]] for s in split]
        after = [float(np.sum(s[f"delta_{which}"][s["divergence"] + 1:])) for s in split]
        row[which] = {"seq_sum_median": round(float(np.median([x.sum() for x in d])), 3),
                      "seq_pos_frac": round(float(np.mean([x.sum() > 0 for x in d])), 3),
                      # the token where the command leaves the plan, and the rest of the response after it
                      "at_divergence_median": round(float(np.median(at)), 3) if at else None,
                      "after_divergence_median": round(float(np.median(after)), 3) if after else None,
                      "after_divergence_pos_frac": round(float(np.mean([a > 0 for a in after])), 3) if after
                      else None}
        if "skill_episode" in steps[0]:   # split by whether the default (quoting) episode skill names the command
            for name, want in (("quoted_in_skill", True), ("not_quoted_in_skill", False)):
                sums = [float(np.sum(s[f"delta_{which}"])) for s in steps
                        if quoted_in(s["skill_episode"], s["action"]) == want]
                row[which][name] = {"steps": len(sums),
                                    "seq_sum_median": round(float(np.median(sums)), 3) if sums else None,
                                    "seq_pos_frac": round(float(np.mean([x > 0 for x in sums])), 3) if sums else None}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", required=True, help="the model folder that played (a run's policy/)")
    ap.add_argument("--play", required=True, help=f"a studies/learning.py run folder holding {PLAY_CHUNKS}")
    ap.add_argument("--env-kwargs", default='{"expert": "sweep"}', help="the play's env settings (JSON)")
    ap.add_argument("--panel", default="alfworld/valid_unseen@v1")
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--max-prompt-len", type=int, default=2048)
    ap.add_argument("--max-steps-per-kind", type=int, default=40)
    ap.add_argument("--skill", choices=("step", "episode"), default="step",
                    help="which skill to score the play's commands under (see the module doc)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import torch

    from envs.panels import get_panel
    from opid_rllib.models.resolve import load_model, load_tokenizer

    torch.set_num_threads(args.torch_threads)
    panel = get_panel(args.panel)
    env_kwargs = {**dict(panel.env_kwargs), **json.loads(args.env_kwargs), "split": panel.split, "max_steps": 30}
    episodes = last_play(Path(args.play) / PLAY_CHUNKS)
    if not episodes or "responses" not in episodes[0]:
        raise SystemExit(f"--play {args.play}: no {PLAY_CHUNKS} with responses there")
    model, tok = load_model(args.policy, args.dtype).eval(), load_tokenizer(args.policy)
    t0 = time.time()
    steps, counts = probe(model, tok, episodes, env_kwargs=env_kwargs, history_length=args.history_length,
                          max_per_kind=args.max_steps_per_kind, max_prompt_len=args.max_prompt_len,
                          skill=args.skill)
    result = {"policy": str(args.policy), "play": str(args.play), "skill": args.skill, **counts,
              "seconds": round(time.time() - t0, 1),
              **{k: summary(v) for k, v in steps.items()}}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "steps_detail": steps}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
