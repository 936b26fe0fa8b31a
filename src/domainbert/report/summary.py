"""The plain-language summary of what won, written from the comparison rows (never typed by hand), and the
number formats the report shares.

Scores are stored as fractions and shown as points (x100), e.g. F1 0.853 -> 85.3 and a difference of
0.021 -> +2.1. A sentence per comparison says "beat", "was worse than" or "did not differ significantly from",
with the difference and its confidence interval, and a caution when a collapsed run is involved; models
below the floor are named first; a closing line names the best mean per task. This module
does not decide significance (``rows.Comparison.verdict`` does) and adds no claim the rows do not hold.
"""

from __future__ import annotations

from domainbert.report.results import FLOOR_MODEL, METRIC_LABEL
from domainbert.report.rows import Comparison, ScoreRow


def points(value: float) -> str:
    """A fraction as points with one decimal: 0.8534 -> ``85.3``."""
    return f"{100 * value:.1f}"


def signed_points(value: float | None) -> str:
    """A difference as signed points: 0.021 -> ``+2.1``, -0.004 -> ``-0.4``, anything that rounds to 0 -> ``0.0``;
    ``-`` for None (a comparison that could not be made)."""
    if value is None:
        return "-"
    text = f"{100 * value:+.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text


def metric_label(metric: str) -> str:
    return METRIC_LABEL.get(metric, metric)


def interval_text(row: Comparison) -> str:
    """``+0.8 to +3.4``: a comparison row's confidence interval in points."""
    if row.ci_low is None:
        return "-"
    return f"{signed_points(row.ci_low)} to {signed_points(row.ci_high)}"


def ci_text(row: Comparison) -> str:
    """``95% CI +0.8 to +3.4; at Holm's level (99.5%) -0.2 to +4.4; paired over 5 seeds, r 0.96`` for a
    comparison row: the unadjusted interval, the one its verdict uses where the page makes more than one
    comparison (``rows.holm_adjusted``), and how its runs were paired. An interval that reaches both ends of what a
    difference of two scores can be (-100 to +100 points: a few seeds that scatter widely, whose t term the
    draws clip to the score's range) says so, since it bounds nothing."""
    text = f"{round(100 * row.confidence)}% CI {interval_text(row)}"
    if row.ci_low is not None and signed_points(row.ci_low) == "-100.0" and signed_points(row.ci_high) == "+100.0":
        text += ", every difference the metric allows: these runs bound nothing"
    fw = row.family
    if fw is not None and fw.level is not None and fw.comparisons > 1:
        text += f"; at Holm's level ({fw_level_text(fw.level)}) {signed_points(fw.low)} to {signed_points(fw.high)}"
    return text + pairing_text(row)


def fw_level_text(level: float) -> str:
    """A family-wise confidence level as a percentage with the digits it needs (``99.5%``, ``99.92%``)."""
    for digits in range(0, 4):
        text = f"{100 * level:.{digits}f}"
        if float(text) < 100:
            return text + "%"
    return f"{100 * level:.4f}%"


def pairing_text(row: Comparison) -> str:
    """``; paired over 5 seeds, r 0.96``: how a comparison's runs were paired (empty for an unpaired one)."""
    design = row.design
    if design is None or not design.paired:
        return ""
    unit = {"seed": "seeds", "replicate": "pretraining replicates", "two-way": "replicates x seeds"}
    text = f"; paired over {design.units} {unit.get(design.pairing or 'seed', 'seeds')}"
    r = design.seed_correlation
    return text + (f", r {r:.2f}" if r is not None else "")


def holm_text(row: Comparison) -> str:
    """``; p 0.012, 0.072 after Holm over 6 comparisons`` where the interval alone would have called it."""
    if row.unadjusted in ("better", "worse") and row.verdict not in ("better", "worse"):
        return (
            f"; p {row.p_value:.3f}, {row.p_holm:.3f} after Holm's correction over the page's "
            f"{row.comparisons} comparisons"
        )
    return ""


def comparison_sentence(row: Comparison) -> str:
    """One comparison as a sentence, e.g. ``continued beat base on ner-task by +2.1 F1 (95% CI +0.8 to +3.4).``"""
    label = metric_label(row.metric)
    a, b, task = row.model, row.reference, row.task
    if row.diff is None:
        return f"{a} could not be compared with {b} on {task}: {row.reason or 'no statistic'}."
    if row.verdict == "better":
        text = f"{a} beat {b} on {task} by {signed_points(row.diff)} {label} ({ci_text(row)})"
    elif row.verdict == "worse":
        text = f"{a} was worse than {b} on {task} by {signed_points(row.diff)} {label} ({ci_text(row)})"
    else:
        text = (
            f"{a} did not differ significantly from {b} on {task} "
            f"({signed_points(row.diff)} {label}, {ci_text(row)}{holm_text(row)})"
        )
    if row.n_seeds < 2 and row.reference != "floor":
        text += "; one seed only, so the interval covers test-set sampling but not seed variance"
    return text + "." + collapse_caveat(row)


def collapse_caveat(row: Comparison) -> str:
    """`` Caution: scratch collapsed in 3 of 3 runs ...`` for a comparison that involves collapsed runs."""
    collapsed = row.collapsed
    if not collapsed:
        return ""
    runs = row.runs
    parts = [
        f"{m} collapsed in {n} of {runs.get(m, n)} run{'s' if runs.get(m, n) != 1 else ''}"
        for m, n in collapsed.items()
    ]
    return (
        f" Caution: {' and '.join(parts)} (constant predictions or a loss that did not fall), so this "
        "difference reflects a failed fine-tuning run, not the encoder."
    )


def best_sentences(scores: list[ScoreRow]) -> list[str]:
    """Per task, the model with the highest mean (ties named together)."""
    out = []
    tasks = list(dict.fromkeys(r.task for r in scores))
    for task in tasks:
        rows = [r for r in scores if r.task == task]
        top = max(r.mean for r in rows)
        winners = [r for r in rows if r.mean == top]
        names = " and ".join(r.model for r in winners)
        seeds = winners[0].n_seeds
        out.append(
            f"Highest mean on {task}: {names} with {points(top)} {metric_label(winners[0].metric)} "
            f"(mean over {seeds} seed{'s' if seeds != 1 else ''})."
        )
    return out


def floor_sentences(scores: list[ScoreRow], comparisons: list[Comparison]) -> list[str]:
    """Per task with a floor: which models scored below it (called out first: a model below a bag-of-words
    baseline says more about the set-up than about the encoder)."""
    out = []
    for task in dict.fromkeys(r.task for r in scores):
        floor = next((r for r in scores if r.task == task and r.model == "floor"), None)
        if floor is None:
            continue
        below = [r for r in scores if r.task == task and r.model != "floor" and r.mean < floor.mean]
        label = metric_label(floor.metric)
        if not below:
            vs_floor = [c for c in comparisons if c.task == task and c.reference == "floor"]
            sure = [c.model for c in vs_floor if c.verdict == "better"]
            unsure = [c.model for c in vs_floor if c.verdict != "better"]
            text = f"Every model's mean is above the floor on {task} ({points(floor.mean)} {label})"
            if unsure:
                text += (
                    f"; significantly for {', '.join(sure) or 'none'}, not significantly for "
                    f"{', '.join(unsure)} (the interval crosses 0 once the page's comparisons are corrected for)"
                )
            else:
                text += ", each significantly"
            out.append(text + ".")
            continue
        named = []
        for r in below:
            cmp = next(
                (c for c in comparisons if c.task == task and c.model == r.model and c.reference == "floor"),
                None,
            )
            # the rule above the floor holds below it too: only a difference that survives the correction
            significance = "significantly" if cmp is not None and cmp.verdict == "worse" else "not significantly"
            named.append(f"{r.model} {points(r.mean)} ({significance})")
        out.append(
            f"Below the floor on {task} ({points(floor.mean)} {label}, a simple baseline trained on the "
            f"same examples): {', '.join(named)}."
        )
    return out


def summary_lines(
    scores: list[ScoreRow], comparisons: list[Comparison], uninformative: set[str] | None = None
) -> list[str]:
    """The summary: one sentence per comparison (significant ones first), then the best mean per task.

    Args:
        scores: score rows from ``results.build_tables``.
        comparisons: comparison rows from ``results.build_tables``.
        uninformative: tasks that cannot separate the arms (``adequacy.task_adequacy``): their models are not
            compared with each other and no best is named (their floor sentence stays).

    Returns:
        Sentences, empty when there are no fine-tuning results.
    """
    if not scores:
        return []
    skip = uninformative or set()
    pairs = [r for r in comparisons if r.reference != "floor" and r.task not in skip]
    significant = [r for r in pairs if r.verdict in ("better", "worse")]
    rest = [r for r in pairs if r.verdict not in ("better", "worse")]
    lines = floor_sentences(scores, comparisons) + [comparison_sentence(r) for r in significant + rest]
    if not comparisons:
        lines.append(
            "No comparison could be made: the base model and the pretrained arms were not all "
            "fine-tuned on the same task."
        )
    return lines + best_sentences([r for r in scores if r.task not in skip])


def above_floor(scores: list[ScoreRow], comparisons: list[Comparison]) -> str:
    """Every model's mean is above the floor: which of them significantly so on every task."""
    models = [m for m in dict.fromkeys(r.model for r in scores) if m != FLOOR_MODEL]
    tasks = {r.task for r in scores}
    sure = [
        m
        for m in models
        if all(
            any((c.task, c.model, c.reference, c.verdict) == (t, m, FLOOR_MODEL, "better") for c in comparisons)
            for t in tasks
        )
    ]
    if len(sure) == len(models):
        which = "each significantly"
    elif sure:
        which = f"significantly on every task for {', '.join(sure)} only"
    else:
        which = "significantly for none (no difference from it survives the correction for the page's comparisons)"
    return f"Every model's mean is above the floor on every task; {which}."


def floor_lead(scores: list[ScoreRow], comparisons: list[Comparison]) -> str:
    """The floor in the verdict's opening, under the same significance rule above it and below it."""
    if not any(r.model == FLOOR_MODEL for r in scores):
        return ""
    below = {
        r.model
        for r in scores
        if r.model != FLOOR_MODEL
        and any(f.task == r.task and f.model == FLOOR_MODEL and r.mean < f.mean for f in scores)
    }
    if not below:
        return above_floor(scores, comparisons)
    sure = sorted(
        m for m in below if any((c.model, c.reference, c.verdict) == (m, FLOOR_MODEL, "worse") for c in comparisons)
    )
    unsure = sorted(below - set(sure))
    parts = []
    if sure:
        parts.append(f"significantly below the floor on at least one task: {', '.join(sure)}")
    if unsure:
        parts.append(f"mean below the floor on at least one task, not significantly: {', '.join(unsure)}")
    return "; ".join(parts).capitalize() + "."
