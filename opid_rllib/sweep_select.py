"""Pick a Tune sweep's best point from its training curves, and say when the pick means nothing; seed its trials.

Why here and not Tune's `ResultGrid.get_best_result`: that returns one trial even when every trial scored the
same (a sweep of a policy that never wins ranks all points at 0.0 and "picks" the first), and the OPID
protocol needs to know that the selection was a tie. The score is the metric averaged over every reported
iteration (Tune's scope="avg"): each iteration is a fresh batch of training tasks, so the mean uses them all;
a point run several times (seeds) scores the mean of its repeats. Pure functions: unit-testable without Ray.
"""

from __future__ import annotations

import itertools
import math


def searched_keys(cfg) -> list[str]:
    """Config fields set to a Tune grid (`tune.grid_search(...)`); none for a plain config."""
    return [k for k, v in vars(cfg).items() if isinstance(v, dict) and "grid_search" in v]


def grid_points(cfg) -> list[dict]:
    """The sweep's points ({key: value} per combination of the grids), or [{}] for a plain config."""
    keys = searched_keys(cfg)
    grids = [getattr(cfg, k)["grid_search"] for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*grids)]


def trial_score(history: list[float]) -> float:
    """Mean of the finite values of a trial's metric history (NaN when it has none)."""
    vals = [float(v) for v in history if v is not None and math.isfinite(float(v))]
    return sum(vals) / len(vals) if vals else float("nan")


# Trials that differ only in these are repeats of one point (Tune --num-samples), never points to choose among.
REPEAT_KEYS = ("seed",)


def group_by_point(trials: list[dict]) -> list[tuple[dict, list[dict]]]:
    """[(point, its trials)] in first-seen order; a point is a trial's params without the REPEAT_KEYS."""
    groups: dict[str, tuple[dict, list[dict]]] = {}
    for t in trials:
        params = {k: v for k, v in t["params"].items() if k not in REPEAT_KEYS}
        groups.setdefault(repr(sorted(params.items(), key=lambda kv: kv[0])), (params, []))[1].append(t)
    return list(groups.values())


def rank_trials(trials: list[dict], metric: str = "opid/success_rate", scope: str = "mean over iterations") -> dict:
    """Rank the sweep's points by mean metric, best first, from trials ({"params": {...}, "history": [...]}).

    A point's score is the mean over its repeats (trials whose params differ only in a REPEAT_KEYS key, e.g. the
    seeds of --num-samples) of each trial's mean metric; `repeats` keeps each trial's own score. Why the mean: a
    seed is not a setting to select, and ranking repeats separately picks the luckiest draw, not the best point.
    A repeat with no score (a failed trial) is left out of its point's mean; the ranking text says so.
    `tied` lists every point whose score equals the best one; `informative` is False when more than one point
    shares the best score (or none has a score), so a report can say the sweep did not select.
    """
    rows = []
    for params, group in group_by_point(trials):
        repeats = [{**{k: t["params"][k] for k in REPEAT_KEYS if k in t["params"]},
                    "score": trial_score(t.get("history", [])), "iterations": len(t.get("history", []))} for t in group]
        scores = [r["score"] for r in repeats if not math.isnan(r["score"])]
        rows.append({"params": params, "score": sum(scores) / len(scores) if scores else float("nan"),
                     "iterations": max(r["iterations"] for r in repeats), "repeats": repeats})
    scored = sorted((r for r in rows if not math.isnan(r["score"])), key=lambda r: -r["score"])
    unscored = [r for r in rows if math.isnan(r["score"])]
    best = scored[0]["score"] if scored else float("nan")
    tied = [r["params"] for r in scored if math.isclose(r["score"], best, rel_tol=1e-9, abs_tol=1e-12)]
    return {"metric": metric, "scope": scope, "ranking": scored + unscored,
            "best": scored[0]["params"] if scored else None, "tied": tied, "informative": len(tied) == 1}


def ranking_text(sel: dict) -> str:
    """Plain-text ranking for the console."""
    lines = [f"sweep ranking by {sel['metric']} ({sel['scope']}):"]
    for r in sel["ranking"]:
        params = ", ".join(f"{k}={v}" for k, v in sorted(r["params"].items()))
        reps = r.get("repeats", [])
        each = "" if len(reps) < 2 else ("; mean of " + ", ".join(
            f"{' '.join(f'{k} {x[k]}' for k in REPEAT_KEYS if k in x)}: {x['score']:.4f}" for x in reps))
        failed = sum(math.isnan(x["score"]) for x in reps)
        each += f"; {failed} of {len(reps)} repeats unscored" if failed and len(reps) > 1 else ""
        lines.append(f"  {r['score']:.4f}  ({r['iterations']} iters{each})  {params}")
    if sel["best"] is None:
        lines.append("no trial reported the metric: nothing selected")
    elif not sel["informative"]:
        lines.append(f"{len(sel['tied'])} points tie at the best score: the sweep does not select a point")
    else:
        lines.append("best: " + ", ".join(f"{k}={v}" for k, v in sorted(sel["best"].items())))
    return "\n".join(lines)


def seed_trials(cfg, num_samples: int) -> int:
    """Give every trial a seed; returns the num_samples to hand Tune.

    Why: RLlib leaves `seed` None (unseeded) unless told, and a tuned example's config never set it, so two runs of
    one sweep ranked its points on different draws (two runs of the same study selected different weights).
    Where nothing set it, the seed is --seed's documented default, 0. With num_samples = N > 1 a point's N trials
    get seeds seed .. seed + N - 1 (a grid over `seed`, and Tune's num_samples 1): the repeats differ from each
    other and a re-run reproduces them. A config that already searches `seed` is left as it is.
    """
    seed = 0 if cfg.seed is None else cfg.seed
    if num_samples > 1 and isinstance(seed, int):
        cfg.seed = {"grid_search": list(range(seed, seed + num_samples))}
        return 1
    cfg.seed = seed
    return num_samples
