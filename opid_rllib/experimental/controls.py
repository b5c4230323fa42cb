"""The skill controls, on the driver so the learner and the skill dumps see the same skills (not in the paper):

* shuffled skills (`shuffle_skills`, preset opid_shuffled): every trajectory is re-scored with the skills
  written for a trajectory of another task, so Delta is prompt noise only;
* content-free skills (`content_free_skills`, preset opid_content_free): every skill is replaced by filler of
  the same token length, so Delta measures what inserting that much text does to the log-probs.

Each trajectory's own analysis is kept under "own_skills". `apply_controls` is the plug-in's one hook
(OPID.training_step, before the learner update).
"""

from __future__ import annotations

from typing import Mapping, Optional


def apply_controls(algo, episodes) -> None:
    """The control the config switches on, applied to this iteration's episodes, and its count in the metrics."""
    cfg = algo.config
    if cfg.shuffle_skills:
        missing = shuffle_skills_across_tasks(episodes, seed=algo.iteration + 1)
        algo.metrics.log_value(("opid", "shuffled_without_donor"), missing, window=1)
    if cfg.content_free_skills:
        n = content_free_skills(episodes, algo.policy_tokenizer())
        algo.metrics.log_value(("opid", "content_free_trajectories"), n, window=1)


def shuffle_skills_across_tasks(episodes, seed: int) -> int:
    """The shuffled-skills control, on the driver so the learner and the skill dumps see the same
    skills: each trajectory's analysis is replaced by the one written for a trajectory of another
    task (`shuffled_skill_donors`); its own is kept under "own_skills". Returns how many
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


def shuffled_skill_donors(traj_tasks: Mapping[str, str], seed: int = 0) -> dict[str, Optional[str]]:
    """The shuffled-skills control: for each trajectory, another trajectory of a DIFFERENT task whose
    skills it is re-scored with (so the skill text is prompt noise, not guidance), or None where no
    such donor exists (e.g. one task fills more than half the batch).

    traj_tasks: trajectory id -> task id. Trajectories are grouped by task (task order shuffled with
    `seed`) and each takes the skills of the trajectory m places further, m = the largest group, so
    a donor is never of the same task as long as that group is at most half of the batch."""
    import random

    by_task: dict[str, list[str]] = {}
    for tid, task in traj_tasks.items():
        by_task.setdefault(task, []).append(tid)
    tasks = sorted(by_task)
    random.Random(seed).shuffle(tasks)
    order = [tid for task in tasks for tid in sorted(by_task[task])]
    n = len(order)
    m = max((len(v) for v in by_task.values()), default=0)
    out: dict[str, Optional[str]] = {}
    for i, tid in enumerate(order):
        donor = order[(i + m) % n] if n else None
        out[tid] = donor if donor is not None and traj_tasks[donor] != traj_tasks[tid] else None
    return out
