"""Deterministic hindsight analyzer: skills from the finished trajectory and env ground truth.

Why: it needs no API (CPU tests, offline runs, ablations, a baseline for the LLM analyzer) and is
reproducible (same trajectory -> same skills). It uses what the env knows in hindsight:
- success: the agent's own action sequence, compressed to the moves that mattered, as a workflow;
- failure: avoidance rules (bad format, inadmissible commands, no-ops, loops, leaving the expert's
  plan) plus the goal, the expert's first moves and ground-truth hints;
- step skills: the earliest steps where the agent left the expert's plan (expert_actions[0]),
  answered in a bad format, or (without an expert) looped / issued unusable commands; optionally
  (`on_plan_step_skills`) also steps where it took the expert's move, so the step term can say "this"
  as well as "not this".
Action vocabulary hints cover ALFWorld ("go to", "take ... from ...") and WebShop ("search[...]",
"click[...]"); anything else is treated generically.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from opid_rllib.analyzer.base import Analyzer, Skills, StepRecord, TrajectoryRecord
from opid_rllib.prompts.admissible import is_inadmissible
from opid_rllib.prompts.admissible import normalize_command as _norm

MAX_WORKFLOW_ACTIONS = 14
MAX_QUOTE_CHARS = 80
MAX_HINT_CHARS = 160
MAX_HINTS = 6

_INSPECT = re.compile(r"^(look|inventory|examine\b|help\b|click\[(description|features|reviews|attributes)\])")
_PAGINATE = re.compile(r"^click\[(next >|< prev)\]$")
_RESET = re.compile(r"^click\[back to search\]$")
_NAVIGATE = re.compile(r"^go to\b")
_CONTAINER = re.compile(r"^(open|close)\b")
_NOOP_OBS = re.compile(r"^\s*nothing happens", re.IGNORECASE)


def quote_command(text: str) -> str:
    """How the analyzer quotes a command in a skill: whitespace folded, cut at MAX_QUOTE_CHARS, in '...'."""
    t = " ".join((text or "").split())
    return "'" + (t if len(t) <= MAX_QUOTE_CHARS else t[: MAX_QUOTE_CHARS - 3] + "...") + "'"


def _imperative(action: str) -> str:
    """'go to fridge 1' reads as a command; 'click[buy now]' needs a verb."""
    a = " ".join(action.split())
    return a if re.match(r"^[a-z][a-z ]*\b", a) and "[" not in a and "<" not in a else f"choose {quote_command(a)}"


def _keep_sentence(expert_next: str) -> str:
    """The step skill for a step on the expert's plan (on-plan critical steps, oracle evaluation)."""
    return f"At this point, {_imperative(expert_next)}."


def _keep_rank(f: "_StepFacts") -> tuple[int, int]:
    """Which right moves to name first: object moves (take, put, heat, ...), then navigation, then opening
    and closing; earliest first within each. An inspection ('look' at step 0) is never named: the student
    makes it anyway, so a skill there says nothing (Delta ~ 0)."""
    a = _norm(f.expert_next)
    return (2 if _CONTAINER.match(a) else 1 if _NAVIGATE.match(a) else 0), f.step.index


def _task_phrase(task: str) -> str:
    t = re.sub(r"(?i)^\s*(your (current )?task is( to)?:?|your question:)\s*", "", " ".join((task or "").split()))
    return t.rstrip(" .") or "finish the task"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + ", then " + items[-1]


@dataclass
class _StepFacts:
    step: StepRecord
    invalid_format: bool = False
    inadmissible: bool = False
    noop: bool = False
    repeat: bool = False
    off_plan: bool = False
    expert_next: str = ""
    suggestion: str = ""         # closest admissible command when the command was inadmissible

    @property
    def wasted(self) -> bool:
        return self.invalid_format or self.inadmissible or self.noop


def _step_facts(traj: TrajectoryRecord) -> list[_StepFacts]:
    facts: list[_StepFacts] = []
    steps = traj.steps
    for i, s in enumerate(steps):
        a = _norm(s.action)
        f = _StepFacts(step=s, invalid_format=not s.action_valid)
        if not f.invalid_format and is_inadmissible(s.action, s.admissible_actions):
            f.inadmissible = True
            adm = [_norm(x) for x in s.admissible_actions]
            close = difflib.get_close_matches(a, adm, n=1, cutoff=0.5)
            f.suggestion = s.admissible_actions[adm.index(close[0])] if close else ""
        if i + 1 < len(steps) and not f.invalid_format and s.reward <= 0:
            nxt = steps[i + 1].observation
            # Only an explicit "Nothing happens.": an unchanged page can be progress (WebShop options).
            f.noop = bool(_NOOP_OBS.match(nxt))
        prev = [_norm(p.action) for p in steps[max(0, i - 2) : i]]
        f.repeat = bool(a) and a in prev and s.reward <= 0 and not _INSPECT.match(a)
        if s.expert_actions:
            f.expert_next = s.expert_actions[0]
            f.off_plan = a != _norm(f.expert_next)
            if not f.off_plan:  # following the expert is never a loop or a detour
                f.noop = f.repeat = False
        facts.append(f)
    return facts


def _compress(facts: list[_StepFacts]) -> list[tuple[int, str]]:
    """The moves that mattered in a successful run, as (step index, action): drop wasted,
    inspection, paging and detour moves; a 'go to'/'open' counts only if something useful
    happens there before the next 'go to'."""
    kept: list[tuple[int, str]] = []
    for f in facts:
        a = " ".join(f.step.action.split())
        na = _norm(a)
        if f.wasted or not na or _INSPECT.match(na) or _PAGINATE.match(na) or na.startswith("close "):
            continue
        if _RESET.match(na):  # the search segment before a reset did not lead anywhere
            last = max((j for j, (_, k) in enumerate(kept) if _norm(k).startswith("search[")), default=0)
            del kept[last:]
            continue
        if kept and _norm(kept[-1][1]) == na:
            continue
        kept.append((f.step.index, a))
    out: list[tuple[int, str]] = []
    for j, (idx, a) in enumerate(kept):
        if _NAVIGATE.match(_norm(a)) or _CONTAINER.match(_norm(a)):
            useful = j == len(kept) - 1
            for _, b in kept[j + 1 :]:
                if _NAVIGATE.match(_norm(b)):
                    break
                if not _CONTAINER.match(_norm(b)):
                    useful = True
                    break
            if not useful:
                continue
        out.append((idx, a))
    return out


def _elide(actions: list[str]) -> list[str]:
    if len(actions) <= MAX_WORKFLOW_ACTIONS:
        return actions
    half = MAX_WORKFLOW_ACTIONS // 2
    return actions[:half] + ["..."] + actions[-half:]


def _is_local_path(value: Any) -> bool:
    """An absolute file path (ALFWorld's `gamefile`): bookkeeping, not advice, and it names this machine's
    cache folder, so a skill quoting it would differ between machines (and so would a warm start trained on it)."""
    return isinstance(value, str) and (value.startswith(("/", "~")) or value[1:3] in (":\\", ":/"))


def _hints(ground_truth: dict[str, Any]) -> list[str]:
    """Generic key/value hints from env facts (target attributes, gold answers, ...)."""
    out: list[str] = []
    for key in sorted(ground_truth)[:MAX_HINTS]:
        value = ground_truth[key]
        if value is None or value == "" or value == [] or value == {} or _is_local_path(value):
            continue
        if isinstance(value, dict):
            text = "; ".join(f"{k}: {v}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
        elif isinstance(value, (list, tuple, set)):
            text = ", ".join(str(v) for v in (sorted(value, key=str) if isinstance(value, set) else value))
        else:
            text = str(value)
        text = " ".join(text.split())
        if len(text) > MAX_HINT_CHARS:
            text = text[: MAX_HINT_CHARS - 3] + "..."
        out.append(f"{str(key).replace('_', ' ')} = {text}")
    return out


class HindsightAnalyzer(Analyzer):
    """Deterministic skills; see module doc."""

    name = "hindsight"

    def __init__(self, max_step_skills: int = 5, on_plan_step_skills: int = 0, quote_sampled: bool = True):
        """on_plan_step_skills: how many of the `max_step_skills` slots may go to steps where the agent took
        the expert's next move (object moves first, see `_keep_rank`), with a skill naming it ("At this point, X.").

        Why: the critical steps below are otherwise all deviations, chosen after seeing the sampled
        command, so the teacher only lowers what was sampled ("X instead of 'Y'") and never raises the
        right command, which the student then rarely samples again. A step skill naming the command
        actually taken gives Delta > 0 there when the teacher reads hints, a dense "keep doing this"
        inside groups that have no outcome signal. Default 0 keeps the paper's deviation-only reading.
        Needs the env's expert plan (`expert_actions`): privileged, like the rest of this analyzer.

        quote_sampled: whether skills quote the sampled commands they correct (step: "X instead of 'Y'.";
        episode: "chose 'Y' instead of 'X'", "'Y' was repeated", "e.g. 'Y'"); False gives the same advice
        without them ("At this point, X."; "left the plan, whose next move was 'X'"). Why: the teacher term scores
        the sampled command under the skill prompt, and a model copies what its prompt shows: quoted, the
        tokens of Y after the first one that leaves the plan go up (SmolLM2, float32 study, step skill: median
        +2.4 nats on ill-formed commands, against -2.5 unquoted), and an ill-formed command the episode skill quotes
        gains a median +4.1 nats over the warm start (+2.0 unquoted; well-formed: +2.6 and 0.0;
        `studies/skill_copy_probe.py --skill episode`), so the term rewards the commands it warns about. Default True
        keeps every study so far as it ran."""
        super().__init__(max_step_skills=max_step_skills)
        if not isinstance(quote_sampled, bool):
            raise ValueError(f"quote_sampled={quote_sampled!r}: must be true or false (whether skills quote "
                             "the sampled commands they correct)")
        self.quote_sampled = quote_sampled
        if isinstance(on_plan_step_skills, bool) or not isinstance(on_plan_step_skills, int) \
                or on_plan_step_skills < 0:
            raise ValueError(f"on_plan_step_skills={on_plan_step_skills!r}: must be an int >= 0 "
                             "(how many of the max_step_skills slots may name a move the agent got right)")
        self.on_plan_step_skills = on_plan_step_skills

    def _format_rule(self, env_name: str, action: str = "") -> str:
        if "search" in (env_name or "").lower():
            return ("Reply with <think>...</think> then exactly one <search>query</search> or "
                    "<answer>answer</answer>.")
        body = action if action else "one admissible action"
        return f"Reply with <think>...</think> then <action>{body}</action>."

    # ---- episode level --------------------------------------------------------------------
    def _success_skill(self, traj: TrajectoryRecord, facts: list[_StepFacts]) -> str:
        flow = _compress(facts)
        actions = _elide([a for _, a in flow])
        text = f"To {_task_phrase(traj.task)}: {_join(actions) or 'finish with the winning action'}."
        used = {idx for idx, _ in flow}
        detours = [f for f in facts if f.step.index not in used]
        if detours:
            example = f" (e.g. {quote_command(detours[0].step.action)})" if self.quote_sampled else ""
            text += f" Skip the detours: {len(detours)} of {len(facts)} steps{example} did not advance the task."
        return text

    def _failure_skill(self, traj: TrajectoryRecord, facts: list[_StepFacts]) -> str:
        n = len(facts)
        bad_fmt = [f for f in facts if f.invalid_format]
        inadm = [f for f in facts if f.inadmissible]
        noops = [f for f in facts if f.noop]
        loops = [f for f in facts if f.repeat]
        off = [f for f in facts if f.off_plan]
        rules: list[tuple[int, str]] = []  # (how often, rule); the most frequent is the core mistake
        quote = self.quote_sampled   # False: name no sampled command (a teacher copies what its prompt shows)
        if off:
            f = off[0]
            chose = (f"chose {quote_command(f.step.action)} instead of" if quote
                     else "left the plan, whose next move was")
            rules.append((len(off), f"leaving the good plan: at step {f.step.index} the agent {chose} "
                                    f"{quote_command(f.expert_next)}."))
        if loops:
            counts: dict[str, int] = {}
            for f in loops:
                counts[f.step.action] = counts.get(f.step.action, 0) + 1
            worst = max(counts, key=lambda k: (counts[k], -list(counts).index(k)))
            what = quote_command(worst) if quote else "a command"
            rules.append((len(loops), f"looping: {what} was repeated without progress; when an "
                                      "action changes nothing, take the next step toward the goal instead."))
        if bad_fmt:
            rule = self._format_rule(traj.env_name)
            rules.append((len(bad_fmt), f"broken format in {len(bad_fmt)} of {n} replies; always "
                                        f"{rule[0].lower()}{rule[1:]}"))
        if inadm:
            example = f" (e.g. {quote_command(inadm[0].step.action)})" if quote else ""
            rules.append((len(inadm), f"commands outside the admissible list{example}; use only listed commands."))
        rules.sort(key=lambda r: -r[0])  # stable: ties keep the order above
        if rules:
            body = "Core mistake: " + rules[0][1] + "".join(
                f" Also avoid {r}" for _, r in rules[1:])
        else:
            body = ("No single bad move stands out: the agent ran out of steps, so move straight "
                    "toward the goal and skip exploration that is not needed.")
        signs = []
        if noops:
            signs.append(f"{quote_command(noops[0].step.action)} had no effect" if quote else "a command had no effect")
        if loops:
            signs.append("the same place or command comes back")
        if signs:
            body += " Warning signs to change course: " + "; ".join(signs) + "."
        text = f"Goal: {_task_phrase(traj.task)}. {body}"
        first_plan = traj.steps[0].expert_actions
        if first_plan:
            text += f" The expert's first moves: {_join([' '.join(a.split()) for a in first_plan[:4]])}."
        hints = _hints(traj.ground_truth)
        if hints:
            text += " Check against: " + "; ".join(hints) + "."
        return text

    def _summary(self, traj: TrajectoryRecord, facts: list[_StepFacts], success: bool) -> str:
        outcome = {True: "succeeded", False: "failed"}[success] if traj.success is not None else \
            f"ended with reward {traj.episode_reward:g} (outcome unknown)"
        parts = [f"The agent {outcome} on '{_task_phrase(traj.task)}' after {len(facts)} steps."]
        counts = [(sum(f.invalid_format for f in facts), "invalid-format repl", "y", "ies"),
                  (sum(f.inadmissible for f in facts), "inadmissible command", "", "s"),
                  (sum(f.noop for f in facts), "no-op action", "", "s"),
                  (sum(f.repeat for f in facts), "repeated action", "", "s"),
                  (sum(f.off_plan for f in facts), "off-plan action", "", "s")]
        issues = [f"{c} {name}{one if c == 1 else many}" for c, name, one, many in counts if c]
        if issues:
            parts.append("Issues: " + ", ".join(issues) + ".")
        return " ".join(parts)

    # ---- step level -----------------------------------------------------------------------
    def _step_skill(self, traj: TrajectoryRecord, f: _StepFacts) -> tuple[str, str] | None:
        """(kind, sentence) for one step, or None if the step needs no advice."""
        if f.invalid_format:
            return "format", self._format_rule(traj.env_name, f.expert_next if f.expert_next else "")
        quote = self.quote_sampled
        if f.off_plan:
            if not quote:
                return "plan", _keep_sentence(f.expert_next)
            return "plan", f"At this point, {_imperative(f.expert_next)} instead of {quote_command(f.step.action)}."
        if f.step.expert_actions:
            return None  # on the expert's plan: nothing to correct
        if f.inadmissible:
            alt = f" such as {quote_command(f.suggestion)}" if f.suggestion else ""
            against = f" instead of {quote_command(f.step.action)}" if quote else ""
            return "other", f"Issue a command from the admissible list{alt}{against}."
        if f.repeat:
            what = quote_command(f.step.action) if quote else "the last command"
            return "other", (f"Stop repeating {what}; choose an admissible action "
                             "you have not tried yet that moves toward the goal.")
        if f.noop:
            if not quote:
                return "other", "A command that changes nothing here wastes the step; pick a different action."
            return "other", f"Do not {quote_command(f.step.action)} here: it changes nothing; pick a different action."
        return None

    def _step_skills(self, traj: TrajectoryRecord, facts: list[_StepFacts], success: bool) -> dict[int, str]:
        on_plan = sorted((f for f in facts if f.expert_next and not f.off_plan and not f.invalid_format
                          and not _INSPECT.match(_norm(f.expert_next))), key=_keep_rank)
        kept = {f.step.index: _keep_sentence(f.expert_next)
                for f in on_plan[: min(self.on_plan_step_skills, self.max_step_skills)]}
        k = self.max_step_skills - len(kept)
        found = [(f.step.index, *r) for f in facts if (r := self._step_skill(traj, f)) is not None]
        # Earliest first, but leave room for plan deviations when format errors are frequent.
        has_plan = any(kind == "plan" for _, kind, _ in found)
        fmt_cap = max(1, k // 2) if has_plan else k
        chosen: dict[int, str] = {}
        n_fmt = 0
        for idx, kind, text in found:
            if len(chosen) >= k:
                break
            if kind == "format":
                if n_fmt >= fmt_cap:
                    continue
                n_fmt += 1
            chosen[idx] = text
        hints = _hints(traj.ground_truth)
        last = traj.steps[-1].index
        if not success and hints and len(chosen) < k and last not in chosen and not traj.steps[-1].expert_actions:
            chosen[last] = "Before you commit, make sure the result matches: " + "; ".join(hints) + "."
        return dict(sorted({**chosen, **kept}.items()))

    def _analyze(self, traj: TrajectoryRecord) -> Skills:
        facts = _step_facts(traj)
        success = bool(traj.success) if traj.success is not None else traj.episode_reward > 0
        skill = self._success_skill(traj, facts) if success else self._failure_skill(traj, facts)
        return Skills(
            episode_summary=self._summary(traj, facts, success),
            episode_skill=skill,
            step_skills=self._step_skills(traj, facts, success),
            attempts=1,
        )

