"""Where a policy's ALFWorld games are lost: ill-formed commands, the task's object never picked up, or picked up
and not placed.

Why: in the SmolLM2 study T takes the expert's command on more steps than GRPO and wins no more games; a share of
agreeing steps cannot say whether a policy fails to find the object, fails after holding it, or writes commands
the game cannot parse. This reads the episodes a play or a training run already wrote and counts, per source:

* take commands: the share of all commands that are takes ('take ...', well-formed or not): where a policy stops
  taking (both arms of seed 0 on machine E's base, T more; docs/STUDIES.md) this column says so from the
  episodes alone;
* ill-formed commands: not in ALFWorld 0.4's command grammar ('go to X N', 'take O N from R N', 'move O N to
  R N', 'open/close/examine/use X N', 'heat/cool/clean/slice O N with R N', 'look', 'inventory'); the game
  answers them "Nothing happens.". Counted apart: the ill-formed takes, and of those the ones naming the task's
  object (e.g. 'take tomato from countertop 1' before the tomato's number was seen: in the SmolLM2 study both OPID
  arms' training rises were mostly these);
* games where the agent picked the task's object up: it issued 'take <object> N from ...' (the object class is
  the task id's second field) and the game took it. The records keep no observations, so "took it" is read off
  the env's plan (`expert_next`): the take was the plan itself, or the plan changed after it (a refused take
  changes no state, and the plan is a function of the state), and how many of those games it won.

* step-skill takes (training dumps of an OPID arm): the takes its step term scored under a step skill, on the
  plan and off it. Off the plan the skill names another command and mostly lowers the sampled one (the share is
  the `delta_step/off_plan_neg_frac` metric); on the plan it raises it, by far less per token; so which way the
  step term pushed takes on net follows from these counts only together with those per-token sizes.
* commands quoted in their own episode's episode skill (training dumps that hold one): ill-formed, on the plan,
  and the rest. The teacher copies what the skill quotes (`studies/skill_copy_probe.py --skill episode`), so a
  quoted command is one the episode term tends to raise.

Sources: a studies/learning.py run folder (its panel play `play_chunks.jsonl`, and its training episodes
`opid_skills/iter_*.jsonl`, one row per iteration; training dumps keep no plans, so only their commands are
counted) or an opid-eval --output folder (episodes.jsonl; teacher_episodes.jsonl after --skills oracle).

    python -m studies.play_phases DIR [DIR ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from opid_rllib.analyzer.hindsight import quote_command
from opid_rllib.eval.chunk_log import last_play
from opid_rllib.eval.panel import read_plays

from studies.comparisons import short_label, short_run_dir
from studies.study_job import PLAY_CHUNKS  # a run folder's panel play

_NAME = r"[a-z]+ \d+"
GRAMMAR = tuple(re.compile(p) for p in (
    rf"go to {_NAME}", rf"take {_NAME} from {_NAME}", rf"move {_NAME} to {_NAME}",
    rf"(?:open|close|examine|use) {_NAME}", rf"(?:heat|cool|clean|slice) {_NAME} with {_NAME}", "look", "inventory"))


def well_formed(command: str) -> bool:
    command = " ".join(str(command).split())
    return any(g.fullmatch(command) for g in GRAMMAR)


def task_object(task_id: str) -> str:
    """'look_at_obj_in_light-Book-None-FloorLamp-202/trial_s1' -> 'book'."""
    parts = str(task_id).split("-")
    if len(parts) < 2 or not parts[1]:
        raise ValueError(f"task_id {task_id!r} is not an ALFWorld game id (type-Object-...): this count is for "
                         "ALFWorld plays only")
    return parts[1].lower()


def picked_up(episode: dict[str, Any]) -> bool:
    """Whether the game took the task's object from the agent at some step (see the module docstring)."""
    take = f"take {task_object(episode['task_id'])} "
    actions, plans = episode.get("actions") or [], episode.get("expert_next") or []
    for t, action in enumerate(actions):
        action = " ".join(str(action).split())
        if not action.startswith(take) or t >= len(plans):
            continue
        if action == plans[t] or (t + 1 < len(plans) and plans[t + 1] != plans[t]):
            return True
    return False


def is_take(action: str) -> bool:
    """A take command, well-formed or not (the takes % column counts both)."""
    return action.startswith("take ")


def count(episodes: Sequence[dict[str, Any]], plans: bool = True) -> dict[str, Any]:
    per_game = [[" ".join(str(a).split()) for a in e.get("actions") or []] for e in episodes]
    bad_per_game = [[a for a in game if not well_formed(a)] for game in per_game]
    bad = [a for game in bad_per_game for a in game]
    row: dict[str, Any] = {"games": len(episodes), "won": sum(bool(e.get("won")) for e in episodes),
                           "commands": sum(map(len, per_game)),
                           "takes": sum(map(is_take, (a for game in per_game for a in game))),
                           "ill_formed": len(bad),
                           "ill_formed_takes": sum(map(is_take, bad)),
                           "games_with_ill_formed": sum(bool(game) for game in bad_per_game),
                           "ill_formed_object_takes": _object_takes(episodes, bad_per_game)}
    if any(_has_step_skill(r) for e in episodes for r in e.get("routed") or []):  # GRPO's dumps route none: '-'
        row["step_skill_takes"] = _step_skill_takes(episodes, per_game)
    if any(_episode_skill(e) for e in episodes):
        row["episode_skill_quotes"] = _episode_skill_quotes(episodes, per_game)
    if plans:
        held = [e for e in episodes if picked_up(e)]
        row.update(picked_up=len(held), won_after_pick_up=sum(bool(e.get("won")) for e in held))
    return row


def _has_step_skill(routed: str | None) -> bool:
    """A dump's `routed` cell ('episode', 'step', 'episode+step' or None) puts a step skill in the prompt."""
    return "step" in (routed or "").split("+")


def _step_skill_takes(episodes: Sequence[dict[str, Any]], per_game: Sequence[Sequence[str]]) -> dict[str, int]:
    """Takes scored under a step skill (`routed` 'step' or 'episode+step'), by whether the sampled command was the
    plan's."""
    out = {"on_plan": 0, "off_plan": 0}
    for e, actions in zip(episodes, per_game):
        for action, routed, on_plan in zip(actions, e.get("routed") or [], e.get("on_plan") or []):
            if _has_step_skill(routed) and on_plan is not None and is_take(action):
                out["on_plan" if on_plan else "off_plan"] += 1
    return out


def quoted_in(skill: str, command: str) -> bool:
    """Whether a skill quotes the command, matched as the hindsight analyzer writes its quotes (whitespace folded,
    long commands cut), so a long command the analyzer did quote counts as quoted."""
    return quote_command(command) in skill


def _episode_skill(episode: dict[str, Any]) -> str:
    return str((episode.get("skills") or {}).get("episode_skill") or "")


def _episode_skill_quotes(episodes: Sequence[dict[str, Any]], per_game: Sequence[Sequence[str]]) -> dict[str, int]:
    """Commands quoted ('...') in their own episode's episode skill, by kind: ill-formed, on the plan (the dump's
    `on_plan`), other; each with its total."""
    out = {k: 0 for k in ("ill_formed", "ill_formed_of", "on_plan", "on_plan_of", "other", "other_of")}
    for e, actions in zip(episodes, per_game):
        skill = _episode_skill(e)
        for action, on_plan in zip(actions, list(e.get("on_plan") or []) + [None] * len(actions)):
            kind = "ill_formed" if not well_formed(action) else "on_plan" if on_plan else "other"
            out[f"{kind}_of"] += 1
            out[kind] += quoted_in(skill, action)
    return out


def _object_takes(episodes: Sequence[dict[str, Any]], bad_per_game: Sequence[Sequence[str]]) -> int | None:
    """Ill-formed takes of the task's object; None where an episode names no task (older dumps)."""
    if any(not e.get("task_id") for e in episodes):
        return None
    return sum(a.split()[:2] == ["take", task_object(e["task_id"])] for e, bad in zip(episodes, bad_per_game)
               for a in bad)


def rows(folder: str | Path) -> list[tuple[str, dict[str, Any]]]:
    folder = Path(folder)
    out: list[tuple[str, dict[str, Any]]] = []
    if (folder / PLAY_CHUNKS).exists():
        out.append(("panel play", count(last_play(folder / PLAY_CHUNKS))))
    for f in sorted((folder / "opid_skills").glob("iter_*.jsonl")):
        episodes = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        out.append((f"training iteration {int(f.stem.split('_')[-1])}", count(episodes, plans=False)))
    for role, episodes in read_plays(folder).items():
        out.append((f"opid-eval {role}", count(episodes)))
    if not out:
        raise SystemExit(f"{folder}: neither a studies/learning.py run folder ({PLAY_CHUNKS}, opid_skills/) nor an "
                         "opid-eval --output folder (episodes.jsonl); pass one of those")
    return out


def label(folder: str | Path) -> str:
    """A run folder by its arm and seed (from the job record beside it, `<folder>.json`), else by its name (a job
    still training), shortened alike."""
    folder = Path(folder)
    record = folder.with_name(folder.name + ".json")
    job = json.loads(record.read_text()) if record.exists() else {}
    if "variant" in job:  # a base's play record names no variant: its folder's name does
        variant = job["variant"]
        return f"{variant if variant == 'grpo' else short_label(variant)} s{job.get('seed', '?')}"
    name, sep, seed = folder.name.rpartition("-s")
    return f"{short_run_dir(name)} s{seed}" if sep and seed.isdigit() else folder.name


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}" if d else "-"


def table(results: dict[str, list[tuple[str, dict[str, Any]]]]) -> Iterable[str]:
    yield ("| source | episodes | won | picked up the object | won of those | commands | takes % | ill-formed % "
           "| of them takes | of the task's object | episodes with one | step-skill takes on / off plan "
           "| quoted by the episode skill %: ill-formed / on plan / other |")
    yield "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for folder, found in results.items():
        for what, r in found:
            held, skill_takes, q = r.get("picked_up"), r.get("step_skill_takes"), r.get("episode_skill_quotes")
            yield (f"| {label(folder)} {what} | {r['games']} | {r['won']} | {'-' if held is None else held} | "
                   f"{'-' if held is None else r['won_after_pick_up']} | {r['commands']:,} | "
                   f"{_pct(r['takes'], r['commands'])} ({r['takes']}) | "
                   f"{_pct(r['ill_formed'], r['commands'])} ({r['ill_formed']}) | {r['ill_formed_takes']} | "
                   f"{'-' if r['ill_formed_object_takes'] is None else r['ill_formed_object_takes']} | "
                   f"{r['games_with_ill_formed']} | "
                   f"{'-' if skill_takes is None else '{on_plan} / {off_plan}'.format(**skill_takes)} | "
                   + ("-" if q is None else " / ".join(_pct(q[k], q[f"{k}_of"]) for k in ("ill_formed", "on_plan",
                                                                                      "other"))) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", help="studies/learning.py run folders or opid-eval --output folders")
    ap.add_argument("--json", default=None, help="also write the counts here")
    args = ap.parse_args(argv)
    results = {f: rows(f) for f in args.folders}
    print("\n".join(table(results)))
    if args.json:
        Path(args.json).write_text(json.dumps({f: dict(r) for f, r in results.items()}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
