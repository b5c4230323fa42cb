"""Learning-curve PNGs: which metrics go on which panel, and drawing them (matplotlib, no pyplot).

A missing metric skips its curve, a panel with no curve is not drawn.
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opid_rllib.report.runs import series


def clip_band(mean, std, lo: float = 0.0, hi: float = 100.0):
    """(lower, upper) of a mean +- std band, clipped to the metric's valid range [lo, hi].

    Why: a success rate near 0 with a large spread across seeds drew a band below 0 %, a value
    that cannot occur. Works on floats and numpy arrays alike."""
    import numpy as np

    m, s = np.asarray(mean, dtype=float), np.abs(np.asarray(std, dtype=float))
    return np.clip(m - s, lo, hi), np.clip(m + s, lo, hi)


def clipped_yerr(mean, std, lo: float = 0.0, hi: float = 100.0):
    """Asymmetric error-bar lengths ([below], [above]) for matplotlib's yerr, staying inside [lo, hi]."""
    import numpy as np

    low, high = clip_band(mean, std, lo, hi)
    m = np.asarray(mean, dtype=float)
    return np.stack([np.atleast_1d(m - low), np.atleast_1d(high - m)])

@dataclass
class Axis:
    ylabel: str
    keys: list[str]                      # exact keys or fnmatch patterns ("opid/success_by_type/*")
    labels: dict[str, str] = field(default_factory=dict)
    ylim: tuple[float, float] | None = None


@dataclass
class Panel:
    name: str                            # file name stem
    title: str
    axes: list[Axis]


_ADV = ("outcome", "episode_teacher", "step_teacher")
PANELS: list[Panel] = [
    Panel("success", "Success rate (overall and by task type)", [Axis(
        "success rate", ["opid/success_rate", "opid/success_by_type/*"],
        {"opid/success_rate": "overall"}, (-0.02, 1.02))]),
    # Validation during training (evaluation.py): plotted at the iterations it was measured, not where carried.
    Panel("evaluation", "Validation during training (no skills, eval temperature)", [
        Axis("success %", ["evaluation/success_pct/*"], {}, (-2, 102)),
        Axis("% of steps", ["evaluation/expert_agreement_pct", "evaluation/format_valid_pct"],
             {"evaluation/expert_agreement_pct": "agreement with the expert",
              "evaluation/format_valid_pct": "well-formed"}, (-2, 102)),
        Axis("steps", ["evaluation/mean_episode_length"], {"evaluation/mean_episode_length": "episode length"})]),
    Panel("adv_share", "Advantage component shares", [Axis(
        "share of |advantage|", [f"learners/opid/adv/{c}_share" for c in _ADV], {}, (-0.02, 1.02))]),
    Panel("adv_abs_mean", "Advantage components: mean |A|", [Axis(
        "mean |A| per token", [f"learners/opid/adv/{c}_abs_mean" for c in _ADV])]),
    Panel("analyzer", "Analyzer calls, errors and failed analyses", [Axis(
        "count per iteration",
        ["env_runners/analyzer/calls", "env_runners/analyzer/errors", "learners/opid/analysis_failed_trajectories"],
        {"learners/opid/analysis_failed_trajectories": "analysis failed trajectories"})]),
    Panel("format_valid", "Format-valid rate", [Axis("format-valid rate", ["opid/format_valid_rate"], {},
                                                     (-0.02, 1.02))]),
    Panel("episode_len", "Episode length", [Axis("steps", ["opid/episode_len_mean"], {})]),
    Panel("policy", "Policy: KL to reference, entropy, clip fraction", [
        Axis("KL(ref)", ["learners/default_policy/kl_ref"]),
        Axis("entropy", ["learners/default_policy/entropy"]),
        Axis("clip fraction", ["learners/default_policy/clip_frac"])]),
]


def _label(key: str, axis: Axis) -> str:
    if key in axis.labels:
        return axis.labels[key]
    tail = key.rsplit("/", 1)[-1]
    for suffix in ("_share", "_abs_mean"):
        if tail.endswith(suffix):
            return tail[: -len(suffix)]
    return tail


def resolve_axis(rows: list[dict[str, Any]], axis: Axis) -> list[tuple[str, list[float], list[float]]]:
    """[(label, xs, ys)] for every key of the axis that has at least one finite value."""
    all_keys = sorted({k for r in rows for k in r})
    out = []
    for pat in axis.keys:
        keys = sorted(fnmatch.filter(all_keys, pat)) if any(c in pat for c in "*?[") else [pat]
        for k in keys:
            xs, ys = series(rows, k)
            if ys:
                out.append((_label(k, axis), xs, ys))
    return out


def _draw(ax, curves, axis: Axis, title: str | None = None) -> None:
    from matplotlib.ticker import MaxNLocator

    markers, styles = "osD^v<>", ("-", "--", "-.", ":")
    for i, (label, xs, ys) in enumerate(curves):  # distinct markers/styles: equal curves stay visible
        ax.plot(xs, ys, marker=markers[i % len(markers)] if len(xs) <= 30 else None, markersize=4,
                linestyle=styles[i % len(styles)], linewidth=1.5, label=label)
    ax.set_xlabel("training iteration")
    ax.set_ylabel(axis.ylabel)
    if axis.ylim:
        ax.set_ylim(*axis.ylim)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    # a new locator, not set_params: a panel's axes share x, and the first one-iteration axis left a FixedLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    iterations = sorted({x for _, xs, _ in curves for x in xs})
    if len(iterations) == 1:  # one iteration: autoscale spans 0.96-1.04, where no integer tick fits
        ax.set_xlim(iterations[0] - 1, iterations[0] + 1)
        ax.set_xticks(iterations)
    if len(curves) > 1 or axis.labels:
        ax.legend(fontsize=8, loc="best")


def make_plots(rows: list[dict[str, Any]], out_dir: os.PathLike | str,
               panels: list[Panel] = PANELS) -> list[dict[str, str]]:
    """One PNG per panel that has data, plus overview.png; returns [{"file", "title"}] (overview first)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    made: list[dict[str, str]] = []
    overview: list[tuple[Axis, list, str]] = []
    for panel in panels:
        resolved = [(a, resolve_axis(rows, a)) for a in panel.axes]
        resolved = [(a, c) for a, c in resolved if c]
        if not resolved:
            continue
        fig = Figure(figsize=(6.4, 2.6 + 2.0 * len(resolved)) if len(resolved) > 1 else (6.4, 4.0), dpi=100)
        axes = fig.subplots(len(resolved), 1, squeeze=False, sharex=True)[:, 0]
        for i, (ax, (a, curves)) in enumerate(zip(axes, resolved)):
            _draw(ax, curves, a)
            if i < len(resolved) - 1:
                ax.set_xlabel("")
        fig.suptitle(panel.title, fontsize=11)
        fig.tight_layout()
        fname = f"{panel.name}.png"
        fig.savefig(out_dir / fname, format="png")
        made.append({"file": fname, "title": panel.title})
        for a, curves in resolved:
            title = panel.title if len(resolved) == 1 else f"{panel.title.split(':')[0]}: {a.ylabel}"
            overview.append((a, curves, title))
    if overview:
        ncols = 3 if len(overview) > 4 else 2 if len(overview) > 1 else 1
        nrows = math.ceil(len(overview) / ncols)
        fig = Figure(figsize=(5.0 * ncols, 3.6 * nrows), dpi=90)
        grid = fig.subplots(nrows, ncols, squeeze=False)
        for ax, (a, curves, title) in zip(grid.flat, overview):
            _draw(ax, curves, a, title)
        for ax in list(grid.flat)[len(overview):]:
            ax.set_visible(False)
        fig.tight_layout()
        fig.savefig(out_dir / "overview.png", format="png")
        made.insert(0, {"file": "overview.png", "title": "Overview"})
    return made


