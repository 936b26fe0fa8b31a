"""The report's PNG figures, drawn from the run's own numbers (figure set-up and saving: ``report.plotting``).

- ``loss_curves``: MLM training loss per step, one line per arm (``summary.json`` ``loss_curve``, else the
  ``kind: train`` records of ``metrics.jsonl``), with a moving average over noisy per-step losses;
- ``perplexity_curves``: held-out domain and general-domain MLM perplexity per arm over the ``kind: eval``
  records (step 0 = before training, last = after), log scale over more than a tenfold range (a
  from-scratch model starts near the vocabulary size), else a linear axis from 0;
- ``score_bars``: per task, mean score per model with standard-deviation error bars and the seeds as dots;
- ``domain_bars``: the cross-domain page's grouped bars.
Each function writes one PNG and returns its file name, or None when it has nothing to draw (never an
empty or made-up chart). Styling is deliberately plain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from domainbert.core.plotting import new_figure, save_png
from domainbert.report.results import METRIC_LABEL
from domainbert.report.rows import ScoreRow
from domainbert.report.scratch_curve import ArmCurve, MetricPoint


def _save(fig: Any, out_dir: Path, name: str) -> str:
    return save_png(fig, out_dir / name).name


def _moving_average(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def loss_points(summary: ArmCurve, metrics: list[MetricPoint]) -> list[tuple[float, float]]:
    """(step, loss) pairs of an arm: the summary's per-step curve, else the logged train records."""
    if summary.loss_curve:
        return [(s, v) for s, v in summary.loss_curve if v is not None]
    return [
        (float(r.step), float(r.values["loss"]))
        for r in metrics
        if r.kind == "train" and r.values.get("loss") is not None and r.step is not None
    ]


def loss_curves(
    pretrain: Mapping[str, ArmCurve],
    metrics: Mapping[str, list[MetricPoint]],
    out_dir: Path,
    name: str = "pretrain_loss.png",
) -> str | None:
    """Training loss per arm; None when no arm logged a loss."""
    series = {arm: loss_points(s, metrics.get(arm, [])) for arm, s in pretrain.items()}
    series = {arm: pts for arm, pts in series.items() if pts}
    if not series:
        return None
    fig, ax = new_figure(figsize=(8, 4.2))
    for arm, pts in series.items():
        steps, losses = [p[0] for p in pts], [p[1] for p in pts]
        window = max(1, len(losses) // 20)
        line = ax.plot(steps, losses, alpha=0.3 if window > 1 else 1.0, linewidth=0.8)[0]
        if window > 1:
            ax.plot(
                steps,
                _moving_average(losses, window),
                color=line.get_color(),
                linewidth=1.8,
                label=f"{arm} (moving avg, {window} steps)",
            )
        else:
            line.set_label(arm)
    ax.set_xlabel("optimizer step")
    rtd = [arm for arm in series if pretrain[arm].rtd]
    ax.set_ylabel("training loss")
    ax.set_title(
        "Pretraining loss (MLM"
        + (f"; {', '.join(rtd)}: generator MLM + weighted replaced-token detection, another scale)" if rtd else ")")
    )
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, out_dir, name)


def eval_points(metrics: list[MetricPoint], key: str) -> list[tuple[float, float]]:
    return [
        (float(r.step), float(r.values[key]))
        for r in metrics
        if r.kind == "eval" and r.values.get(key) is not None and r.step is not None
    ]


def perplexity_curves(
    metrics: Mapping[str, list[MetricPoint]],
    out_dir: Path,
    name: str = "pretrain_perplexity.png",
    summaries: Mapping[str, ArmCurve] | None = None,
) -> str | None:
    """Domain (held-out) and general perplexity per arm over the eval records; None without any."""
    panels = [("domain_perplexity", "Held-out domain perplexity"), ("general_perplexity", "General-domain perplexity")]
    data = {key: {arm: eval_points(m, key) for arm, m in metrics.items()} for key, _ in panels}
    panels = [(k, t) for k, t in panels if any(data[k].values())]
    if not panels:
        return None
    fig, axes = new_figure(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels, strict=True):
        for arm, pts in data[key].items():
            curve = (summaries or {}).get(arm)
            rtd = curve is not None and curve.rtd  # its perplexity is its generator's
            if pts:
                ax.plot(
                    [p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{arm} (generator)" if rtd else arm
                )
        values = [p[1] for pts in data[key].values() for p in pts]
        if min(values) > 0 and max(values) / min(values) > 10:
            ax.set_yscale("log")
            # Ticks at 1, 2, 5 x 10^k with plain numbers; labelled minor ticks cost seconds and clutter.
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel("MLM perplexity (log scale)")
        else:
            # From 0, as the score bars: an axis cut near the first value makes a 2% change fill the panel.
            ax.set_ylim(0.0, max(values) * 1.08)
            ax.set_ylabel("MLM perplexity")
        ax.set_xlabel("optimizer step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(fig, out_dir, name)


def score_bars(scores: list[ScoreRow], out_dir: Path, name: str = "finetune_scores.png") -> str | None:
    """Per task: mean test score per model (points), error bars of one standard deviation, seeds as dots."""
    tasks = list(dict.fromkeys(r.task for r in scores))
    if not tasks:
        return None
    cols = min(len(tasks), 2)
    rows = math.ceil(len(tasks) / cols)
    fig, axes = new_figure(rows, cols, figsize=(6 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(tasks) :]:
        ax.set_visible(False)
    for ax, task in zip(axes.flat, tasks, strict=False):
        rows_t = [r for r in scores if r.task == task]
        xs = range(len(rows_t))
        means = [100 * r.mean for r in rows_t]
        stds = [100 * r.std for r in rows_t]
        # The floor (a baseline, not a model) is grey and hatched so it reads as a reference line.
        colors = ["#cccccc" if r.model == "floor" else "#8fb3d9" for r in rows_t]
        hatches = ["//" if r.model == "floor" else "" for r in rows_t]
        bars = ax.bar(xs, means, yerr=stds, capsize=6, color=colors, edgecolor="#335", label="mean +- std")
        for bar, hatch in zip(bars, hatches, strict=True):
            bar.set_hatch(hatch)
        for x, r in zip(xs, rows_t, strict=True):
            ax.scatter([x] * len(r.values), [100 * v for v in r.values], color="#222", s=12, zorder=3)
        ax.set_xticks(list(xs), [r.model for r in rows_t], rotation=20)
        # Bars start at 0 (a cut axis exaggerates differences); the seeds' dots show the spread.
        top = max([m + s for m, s in zip(means, stds, strict=True)] + [100 * max(r.values) for r in rows_t])
        ax.set_ylim(0.0, min(100.0, top * 1.08) if top > 0 else 1.0)
        ax.set_ylabel(f"test {METRIC_LABEL.get(rows_t[0].metric, rows_t[0].metric)} (x100)")
        ax.set_title(task)
        ax.grid(axis="y", alpha=0.3)
    return _save(fig, out_dir, name)


def domain_bars(rows: list[ScoreRow], out_dir: Path, name: str = "cross_domain_scores.png") -> str | None:
    """Grouped bars: one group per (domain, task), one bar per model, mean +- std in points."""
    groups = list(dict.fromkeys((r.domain, r.task) for r in rows))
    models = list(dict.fromkeys(r.model for r in rows))
    if not groups:
        return None
    width = 0.8 / len(models)
    fig, ax = new_figure(figsize=(max(7.0, 1.6 * len(groups) * max(1, len(models)) / 2), 4.6))
    for i, model in enumerate(models):
        xs, means, stds = [], [], []
        for g, (domain, task) in enumerate(groups):
            row = next((r for r in rows if (r.domain, r.task, r.model) == (domain, task, model)), None)
            if row is not None:
                xs.append(g + (i - (len(models) - 1) / 2) * width)
                means.append(100 * row.mean)
                stds.append(100 * row.std)
        ax.bar(xs, means, width=width, yerr=stds, capsize=3, label=model)
    ax.set_xticks(range(len(groups)), [f"{d}\n{t}" for d, t in groups], fontsize=8)
    ax.set_ylabel("test score (x100; F1 or macro-F1)")
    ax.set_title("Fine-tuning scores by domain")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out_dir, name)
