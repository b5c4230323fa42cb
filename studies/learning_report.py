"""studies/learning.py's report: the table, paired differences, summary, Delta statistics and the plot.

Pure functions of the runs' records (no training, no args), so tests import them without Ray.
"""

from __future__ import annotations

import math
import statistics
import textwrap


def mean_std(v: list[float]) -> str:
    return "-" if not v else f"{statistics.mean(v):.1f}+-{statistics.pstdev(v):.1f}"


def table_text(rows: dict[str, list[dict]]) -> str:
    """Success % per column, then Agree%: panel steps that took the env expert's next command (about 3,800
    steps on valid_unseen, so it resolves a policy moving toward or away from the plan long before success
    over 126 games does; '-' for runs cached before it was recorded)."""
    cols = next(iter(rows.values()))[0]["columns"]
    lines = [f"{'variant':<22}" + "".join(f"{c:>12}" for c in [*cols, "Agree%"])]
    for label, tables in rows.items():
        cells = [mean_std([t["success_pct"][c] for t in tables if t["success_pct"][c] is not None]) for c in cols]
        cells.append(mean_std([t["expert_agreement_pct"] for t in tables if "expert_agreement_pct" in t]))
        lines.append(f"{label:<22}" + "".join(f"{c:>12}" for c in cells))
    return "\n".join(lines)


def paired_text(runs: list[dict], baseline: str) -> str:
    """Per-seed difference (variant - baseline) on All: the comparison the claim is about."""
    lines = []
    for v in dict.fromkeys(r["variant"] for r in runs):
        if v == baseline:
            continue
        d = paired_diffs(runs, v, baseline)
        if d:
            per_seed = ', '.join(f'{x:+.1f}' for x in d)
            lines.append(f"{v} - {baseline} (All, per seed): {per_seed}; mean {statistics.mean(d):+.1f}")
        g = per_game(runs, v, baseline)
        if g:
            lines.append(f"  games only {v} / only {baseline} won: " + "; ".join(
                f"{'seed ' + s if s != 'pooled' else s} {x['only_variant']} / {x['only_baseline']} "
                f"(sign test p {x['p_sign']:.3g})" for s, x in g.items()))
    return "\n".join(lines)


def paired_by_seed(runs: list[dict], variant: str, baseline: str = "grpo", column: str = "All") -> dict[int, float]:
    """Seed -> (variant - baseline) success points on `column` ("Agree%": expert agreement), for each seed both ran
    with a value there (in the runs' order): the one pairing paired_diffs, paired_mean and paired_seeds share."""
    by = {(r["variant"], r["seed"]): (r["table"].get("expert_agreement_pct") if column == "Agree%"
                                      else r["table"]["success_pct"][column]) for r in runs}
    return {s: by[(variant, s)] - by[(baseline, s)] for (v, s) in by if v == variant and (baseline, s) in by
            and by[(variant, s)] is not None and by[(baseline, s)] is not None}


def paired_diffs(runs: list[dict], variant: str, baseline: str = "grpo", column: str = "All") -> list[float]:
    """(variant - baseline) success points on `column` ("Agree%": expert agreement), one per seed both ran."""
    return list(paired_by_seed(runs, variant, baseline, column).values())


def paired_seeds(runs: list[dict], variant: str, baseline: str = "grpo") -> list[int]:
    """The seeds paired_mean averages over on All, sorted."""
    return sorted(paired_by_seed(runs, variant, baseline))


def sign_test_p(b: int, c: int) -> float:
    """Two-sided exact sign test (McNemar's exact form) on b games only one arm won against c only the other won:
    the chance of a split at least this uneven if each such game were a coin flip."""
    k, n = min(b, c), b + c
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0


def won_games(table: dict) -> tuple[int, int] | None:
    """(games won, games played) of a play's table, from `won_by_task` or else from its All success and count;
    None where it records neither."""
    if table.get("won_by_task"):
        return sum(table["won_by_task"].values()), len(table["won_by_task"])
    n, pct = (table.get("n") or {}).get("All"), (table.get("success_pct") or {}).get("All")
    return None if n is None or pct is None else (round(pct * n / 100), n)


def discordant(mine: dict, theirs: dict) -> tuple[int, int, int] | None:
    """Games only `mine` won, games only `theirs` won, and games both played, from two plays' tables of one panel and
    play seed; None where that needs game names a table lacks (plays cached before `won_by_task` was recorded).
    A play that won no game differs from the other on exactly the games the other won, so it needs none."""
    wm, wt = mine.get("won_by_task"), theirs.get("won_by_task")
    if wm and wt:
        games = wm.keys() & wt.keys()
        return sum(wm[t] and not wt[t] for t in games), sum(wt[t] and not wm[t] for t in games), len(games)
    a, z = won_games(mine), won_games(theirs)
    if a is None or z is None or a[1] != z[1] or 0 not in (a[0], z[0]):
        return None
    return a[0], z[0], a[1]


def per_game(runs: list[dict], variant: str, baseline: str = "grpo") -> dict:
    """Game by game, per seed both arms played (the same panel and play seed): games only the variant won, games
    only the baseline won, and the sign test's p on them; then pooled over those seeds. It says whether a gap is
    larger than the panel's sampling noise for these trained policies, not whether it outlasts the spread over
    training seeds. Pairs whose games cannot be told apart (`discordant`) are left out, not read as lost."""
    tables = {(r["variant"], r["seed"]): r["table"] for r in runs}
    out = {}
    for (v, s), mine in tables.items():
        theirs = tables.get((baseline, s))
        d = None if v != variant or theirs is None else discordant(mine, theirs)
        if d is not None:
            b, c, n = d
            out[str(s)] = {"only_variant": b, "only_baseline": c, "games": n, "p_sign": sign_test_p(b, c)}
    if out:
        b, c = (sum(x[k] for x in out.values()) for k in ("only_variant", "only_baseline"))
        out["pooled"] = {"only_variant": b, "only_baseline": c, "games": sum(x["games"] for x in out.values()),
                         "p_sign": sign_test_p(b, c)}
    return out


def paired_mean(runs: list[dict], variant: str, baseline: str = "grpo", column: str = "All") -> float | None:
    """Mean over the seeds both ran of (variant - baseline) success points on `column`; None if none."""
    d = paired_diffs(runs, variant, baseline, column)
    return round(statistics.mean(d), 2) if d else None  # panel figures carry 2 decimals; so does their mean


def summary(runs: list[dict], opid: str = "opid", shuffled: str = "opid_shuffled") -> dict:
    """The figures the README quotes: OPID and the shuffled-skills control (the variants named) minus GRPO,
    success points on All, mean over seeds; plus every other variant's difference."""
    out = {"opid_minus_grpo_all": paired_mean(runs, opid), "shuffled_minus_grpo_all": paired_mean(runs, shuffled),
           "opid_variant": opid, "shuffled_variant": shuffled}
    others = [v for v in dict.fromkeys(r["variant"] for r in runs) if v != "grpo"]
    out["minus_grpo_all_by_variant"] = {v: paired_mean(runs, v) for v in others}
    # the seeds each of those means pairs: a mean over one seed must not read as one over three
    out["paired_seeds_by_variant"] = {v: paired_seeds(runs, v) for v in others}
    # points of expert agreement on the panel's steps, same pairing (None where a run predates the metric)
    out["minus_grpo_agreement_by_variant"] = {v: paired_mean(runs, v, column="Agree%") for v in others}
    # games only the variant / only GRPO won, per seed and pooled, with the sign test (seeds that recorded games)
    out["per_game_vs_grpo_by_variant"] = {v: per_game(runs, v) for v in others}
    return out


def run_seconds(runs: list[dict]) -> dict:
    """Training and panel seconds per run and in all (from each run's own record, so a report that only
    reads the cache still says what the study cost)."""
    per = {f"{r['variant']} s{r['seed']}": {"train_s": round(r["train_s"], 1), "eval_s": round(r["eval_s"], 1)}
           for r in runs}
    return {"per_run": per, "all_runs_s": round(sum(r["train_s"] + r["eval_s"] for r in runs), 1)}


def delta_text(runs: list[dict]) -> str:
    """Median over iterations and seeds of the Delta statistics and advantage scales, per variant.

    Delta = log pi_old(y | skill prompt) - log pi_old(y | prompt) per response token of the routed steps;
    |A_out|, |A_ep|, |A_step| = mean absolute outcome / weighted episode-skill / weighted step-skill
    advantage per response token (all tokens of the batch)."""
    keys = [("dEp mean", "delta_ep", "token_mean"), ("dEp |.|", "delta_ep", "token_abs_mean"),
            ("dEp >0", "delta_ep", "token_pos_frac"), ("dStep mean", "delta_step", "token_mean"),
            ("dStep |.|", "delta_step", "token_abs_mean"), ("dStep >0", "delta_step", "token_pos_frac"),
            ("|A_out|", "adv", "outcome_abs_mean"), ("|A_ep|", "adv", "episode_teacher_abs_mean"),
            ("|A_step|", "adv", "step_teacher_abs_mean")]
    lines = ["variant".ljust(22) + "".join(label.rjust(11) for label, _, _ in keys)]
    for v in dict.fromkeys(r["variant"] for r in runs):
        cells = []
        for _, a, b in keys:
            xs = [it[a][b] for r in runs if r["variant"] == v for it in r["iters"] if isinstance(it.get(a), dict)
                  and b in it[a] and it[a][b] == it[a][b]]
            cells.append(f"{statistics.median(xs):.3g}" if xs else "-")
        lines.append(v.ljust(22) + "".join(c.rjust(11) for c in cells))
    return "\n".join(lines)


def short_labels(variants: list[str], width: int = 16) -> dict[str, str]:
    """Plot labels: a variant name longer than `width` becomes a letter and its preset ('C opid'), spelled out
    under the figure, so a study's full override strings neither overlap the bars nor cover the curves."""
    return {v: v if len(v) <= width else f"{chr(ord('A') + i)} {v.partition(':')[0]}" for i, v in enumerate(variants)}


def plot(runs: list[dict], base_tables: list[dict], path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from opid_rllib.report.plots import clip_band, clipped_yerr

    variants = list(dict.fromkeys(r["variant"] for r in runs))
    short = short_labels(variants)
    notes = [line for v in variants if short[v] != v
             for line in textwrap.wrap(f"{short[v].split()[0]} = {v}", 150, subsequent_indent="    ")]
    height = 4 + 0.18 * len(notes)  # inches: the axes, then a line per spelled-out label
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, height))
    for v in variants:
        curves = np.array([[it["train_success"] for it in r["iters"]] for r in runs if r["variant"] == v], float)
        x = np.arange(1, curves.shape[1] + 1)
        m, s = np.nanmean(curves, 0), np.nanstd(curves, 0)
        ax1.plot(x, 100 * m, marker="o", label=short[v])
        ax1.fill_between(x, *clip_band(100 * m, 100 * s, 0.0, 100.0), alpha=0.2)  # a rate stays in [0, 100] %
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("training-rollout success % (mean +- std over seeds)")
    ax1.set_title("success vs iteration (train tasks, with exploration)")
    ax1.legend()
    vals = [[t["success_pct"]["All"] for t in base_tables]] + [
        [r["table"]["success_pct"]["All"] for r in runs if r["variant"] == v] for v in variants]
    # each bar names its seed count: a study's arms can stand at different counts while it is being filled in
    labels = [f"{name}\n({len(x)} seed{'s' * (len(x) != 1)})"
              for name, x in zip(["base"] + [short[v] for v in variants], vals)]
    means = [np.mean(x) for x in vals]
    ax2.bar(labels, means, yerr=clipped_yerr(means, [np.std(x) for x in vals]), capsize=4,
            color=["grey"] + [f"C{i}" for i in range(len(variants))])
    for i, x in enumerate(vals):
        ax2.scatter([i] * len(x), x, color="k", s=10, zorder=3)
    ax2.set_ylabel("valid_unseen success % (no skills)")
    ax2.set_title("held-out panel after training")
    ax2.tick_params(axis="x", labelrotation=20)
    if notes:
        fig.text(0.01, 0.01, "\n".join(notes), fontsize=7, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, 0.12 * len(notes) / height, 1, 1))  # the axes stay above the spelled-out labels
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig
