"""The report's first figure: the answer at a glance.

One panel per task. Each row is an arm's difference from the task's better reference (``results.best_reference``:
the warmed-up base or the original checkpoint), in points, with its 95% interval; a filled marker is a claim that
survives Holm's correction over the page's comparisons, a hollow one does not, and a thin line is the
family-wise interval the verdict uses; an arm with collapsed runs is a grey cross, never filled. The shaded band is the
detectable difference (``rows.holm_adjusted``): a true difference inside it would be missed more often than one
time in five, so an interval inside it is no evidence of "no effect". A dashed line marks the floor's difference
from the same reference where the task has a floor. The key under each panel names every mark, outside the axes so
that it covers no interval. The numbers are the comparison rows'; nothing is computed
here beyond choosing which rows to draw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from domainbert.core.plotting import new_figure, save_png
from domainbert.report.results import FLOOR_MODEL, METRIC_LABEL, best_reference
from domainbert.report.rows import Comparison, ScoreRow

NAME = "answer.png"


def _rows(scores: list[ScoreRow], comparisons: list[Comparison], task: str, arms: list[str]) -> list[Comparison]:
    ref = best_reference(scores, task)
    return [
        c
        for arm in arms
        for c in comparisons
        if (c.task, c.model, c.reference) == (task, arm, ref) and c.diff is not None
    ]


def _floor_offset(scores: list[ScoreRow], task: str) -> float | None:
    """The floor's mean minus the better reference's mean on ``task`` (None without a floor)."""
    ref = best_reference(scores, task)
    floor = next((r for r in scores if r.task == task and r.model == FLOOR_MODEL), None)
    reference = next((r for r in scores if r.task == task and r.model == ref), None)
    if floor is None or reference is None:
        return None
    return float(floor.mean) - float(reference.mean)


def _draw_row(ax: Any, y: int, c: Comparison) -> None:
    """One arm: its 95% interval (thick), the family-wise interval its verdict uses (thin), a marker filled when
    the claim survives Holm; an arm with collapsed runs is a grey cross, never filled (a failed run, not an
    encoder)."""
    fw = c.family
    if fw is not None and fw.low is not None and fw.high is not None:
        ax.plot([100 * fw.low, 100 * fw.high], [y, y], color="0.55", linewidth=0.8)
    collapsed = bool(c.collapsed)
    sure = fw is not None and fw.significant and not collapsed
    assert c.diff is not None and c.ci_low is not None and c.ci_high is not None
    ax.errorbar(
        100 * c.diff,
        y,
        xerr=[[100 * (c.diff - c.ci_low)], [100 * (c.ci_high - c.diff)]],
        fmt="x" if collapsed else "o",
        color="0.5" if collapsed else "tab:blue",
        markerfacecolor="tab:blue" if sure else "white",
        elinewidth=2,
        capsize=3,
    )


def answer_figure(scores: list[ScoreRow], comparisons: list[Comparison], arms: list[str], out_dir: Path) -> str | None:
    """Write ``answer.png``; its file name, or None when no arm has a comparison with a reference."""
    tasks = [t for t in dict.fromkeys(r.task for r in scores) if _rows(scores, comparisons, t, arms)]
    if not tasks:
        return None
    cols = min(len(tasks), 2)
    nrows = math.ceil(len(tasks) / cols)
    key = 0.5  # inches for the key under the axes
    height = max(2.2, 0.55 * max(len(_rows(scores, comparisons, t, arms)) for t in tasks) + 1.4) + key
    fig, axes = new_figure(nrows, cols, figsize=(6 * cols, height * nrows), squeeze=False)
    for ax in axes.flat[len(tasks) :]:
        ax.set_visible(False)
    for ax, task in zip(axes.flat, tasks, strict=False):
        rows = _rows(scores, comparisons, task, arms)
        ref = rows[0].reference
        band = min((d for c in rows if (d := c.detectable) is not None), default=None)
        if band is not None:
            ax.axvspan(-100 * band, 100 * band, color="0.88", label="detectable difference (80% power)")
        ax.axvline(0, color="0.3", linewidth=0.8)
        floor = _floor_offset(scores, task)
        if floor is not None:
            ax.axvline(100 * floor, color="tab:red", linestyle="--", linewidth=1, label="floor")
        for y, c in enumerate(rows):
            _draw_row(ax, y, c)
        ax.set_yticks(range(len(rows)), [c.model + (" (collapsed runs)" if c.collapsed else "") for c in rows])
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.invert_yaxis()
        label = METRIC_LABEL.get(rows[0].metric, rows[0].metric)
        ax.set_xlabel(f"difference from {ref} ({label}, points)")
        ax.set_title(task, fontsize=10)
        _key(ax, rows)
    return save_png(fig, out_dir / NAME).name


def _key(ax: Any, rows: list[Comparison]) -> None:
    """The legend, under the axis label and outside the axes (so it covers no interval): every mark drawn."""
    from matplotlib.lines import Line2D

    handles, _ = ax.get_legend_handles_labels()  # the band and the floor, where drawn
    handles += [
        Line2D([], [], color="tab:blue", linewidth=2, marker="o", label="95% interval, survives Holm"),
        Line2D(
            [], [], color="tab:blue", linewidth=2, marker="o", markerfacecolor="white", label="95% interval, does not"
        ),
        Line2D([], [], color="0.55", linewidth=0.8, label="family-wise interval"),
    ]
    if any(c.collapsed for c in rows):
        handles.append(Line2D([], [], color="0.5", linestyle="none", marker="x", label="collapsed runs"))
    ax.legend(handles=handles, fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.36), frameon=False)
