"""Driver side of the advantage: GRPO groups, the outcome advantage, and sharding.

Group statistics need every episode of a group, so they are computed on the driver before the
batch is split over learners; each shard then holds whole groups (RLlib's own sharding may cut
an episode across learners).
"""

from __future__ import annotations

import numpy as np

from opid_rllib.advantages import outcome_advantage, step_scores
from opid_rllib.routing import shuffled_skill_donors


INVALID_ACTION_SOURCES = ("format", "env", "repeat")


def step_validity(ep, source: str = "format") -> np.ndarray:
    """valid_i per step: the response's format ("format", the reference's is_action_valid); with "env" also
    the env's acceptance of the command (info["action_valid"] after the step; ALFWorld's "Nothing happens.");
    with "repeat" only a rejected command that repeats the previous step's (a no-op loop), so a failed first
    'take' is not penalised: "env" taught the tiny policy never to take."""
    valid = np.asarray(ep.get_extra_model_outputs("format_valid"), bool)
    if source in ("env", "repeat"):
        after = ep.get_infos()[1:]  # infos[0] is the reset's
        rejected = ~np.array([bool(i.get("action_valid", True)) for i in after], bool)[: len(valid)]
        if source == "repeat":
            actions = [str(a) for a in ep.get_actions()][: len(valid)]
            rejected &= np.array([i > 0 and a == actions[i - 1] for i, a in enumerate(actions)], bool)
        valid = valid & ~rejected
    return valid


def attach_outcome_advantages(episodes, invalid_action_penalty: float, mode: str, source: str = "format") -> None:
    """A_out per step-sample into `custom_data["opid"]["outcome_adv"]`.

    S_i = R - penalty * (1 - valid_i) (valid_i: `step_validity`); the group mean (and std) run over ALL
    step-samples of the group, as the reference does (`compute_mean_std_cross_steps=True`)."""
    scores, groups, owners = [], [], []
    for k, ep in enumerate(episodes):
        meta = ep.custom_data["opid"]
        valid = step_validity(ep, source)
        scores.append(step_scores(float(sum(ep.get_rewards())), valid, invalid_action_penalty))
        groups += [meta["group_id"]] * len(ep)
        owners += [k] * len(ep)
    if not episodes:
        return
    adv = outcome_advantage(np.concatenate(scores), groups, mode)
    owners = np.asarray(owners)
    for k, ep in enumerate(episodes):
        ep.custom_data["opid"]["outcome_adv"] = adv[owners == k].astype(np.float32).tolist()


def shard_by_group(episodes, num_shards: int) -> list[list]:
    """Whole GRPO groups per shard, balanced by step count."""
    by_group: dict[str, list] = {}
    for ep in episodes:
        by_group.setdefault(ep.custom_data["opid"]["group_id"], []).append(ep)
    shards: list[list] = [[] for _ in range(num_shards)]
    for gid in sorted(by_group, key=lambda g: (-sum(len(e) for e in by_group[g]), g)):
        min(shards, key=lambda s: sum(len(e) for e in s)).extend(by_group[gid])
    return shards


def shuffle_skills_across_tasks(episodes, seed: int) -> int:
    """The shuffled-skills control, on the driver so the learner and the skill dumps see the same
    skills: each trajectory's analysis is replaced by the one written for a trajectory of another
    task (routing.shuffled_skill_donors); its own is kept under "own_skills". Returns how many
    trajectories found no foreign donor (they get no skills, i.e. plain GRPO)."""
    metas = {ep.custom_data["opid"]["traj_id"]: ep.custom_data["opid"] for ep in episodes}
    donors = shuffled_skill_donors({tid: str(m["task_id"]) for tid, m in metas.items()}, seed=seed)
    own = {tid: m.get("skills") for tid, m in metas.items()}
    for tid, m in metas.items():
        m["own_skills"] = own[tid]
        m["skills"] = own[donors[tid]] if donors[tid] is not None else None
        m["skills_from"] = donors[tid]
    return sum(d is None for d in donors.values())


# The content-free control's filler: plain words that say nothing about any task.
CONTENT_FREE_FILLER = "This note is intentionally left blank and carries no advice. "


def content_free_text(n_tokens: int, tokenizer, filler: str = CONTENT_FREE_FILLER) -> str:
    """Filler text of `n_tokens` tokens (as `tokenizer` encodes it alone), e.g. to stand in for a skill: the filler
    repeated and cut at that token; where the cut piece re-encodes longer, whole words are dropped until it fits."""
    if n_tokens <= 0:
        return ""
    ids = tokenizer(filler * (n_tokens // 4 + 2), add_special_tokens=False).input_ids[:n_tokens]
    text = tokenizer.decode(ids).strip()
    # decode/encode need not round-trip on a cut word; trim words until the count is not above n
    while text and len(tokenizer(text, add_special_tokens=False).input_ids) > n_tokens:
        text = text.rsplit(" ", 1)[0] if " " in text else ""
    return text


def content_free_skills(episodes, tokenizer) -> int:
    """The prompt-shift control, on the driver like the shuffled one: every skill text (episode and step) is
    replaced by content-free filler of the same token length, so the skill prompt differs from the plain one by
    as much text as the real skill but holds no guidance; the real skills are kept under "own_skills". Returns
    how many trajectories carried skills."""
    n = 0
    for ep in episodes:
        m = ep.custom_data["opid"]
        sk = m.get("skills")
        m["own_skills"] = sk
        if not sk:
            continue
        count = lambda t: len(tokenizer(t, add_special_tokens=False).input_ids)  # noqa: E731
        m["skills"] = dict(sk, episode_skill=content_free_text(count(sk.get("episode_skill") or ""), tokenizer),
                           step_skills={k: content_free_text(count(v), tokenizer)
                                        for k, v in (sk.get("step_skills") or {}).items()})
        n += 1
    return n


def log_rollout_metrics(metrics, episodes) -> None:
    """The iteration's rollout results under opid/ (success, length, format-valid rate, env errors, per task type)."""
    metas = [ep.custom_data["opid"] for ep in episodes]
    won = np.asarray([m["won"] for m in metas], float)
    log = lambda k, v: metrics.log_value(("opid", *k.split("/")), float(v), window=1)  # noqa: E731
    log("success_rate", won.mean())
    log("episode_len_mean", np.mean([len(ep) for ep in episodes]))
    fv = np.concatenate([np.asarray(ep.get_extra_model_outputs("format_valid"), float) for ep in episodes])
    log("format_valid_rate", fv.mean())
    log("env_errors", sum(bool(m.get("env_error")) for m in metas))
    for tt in sorted({m["task_type"] for m in metas}):
        log(f"success_by_type/{tt}", np.mean([m["won"] for m in metas if m["task_type"] == tt]))
