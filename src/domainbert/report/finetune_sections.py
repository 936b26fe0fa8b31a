"""The report's fine-tuning sections: every model's scores with the floor, the comparisons with their seed-aware
intervals, the plain-language summary (written from the comparison rows, never by hand), and how the
comparison is made (the method in words, with the run's settings).

The numbers come from ``results.py``; the headline and verdict are ``headline.py``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.core.document import Figure, Section, Table
from domainbert.report import figures
from domainbert.report.adequacy import task_adequacy
from domainbert.report.draws import BOUND_ERROR
from domainbert.report.results import reference_of
from domainbert.report.rows import Comparison, ScoreRow
from domainbert.report.sections import fmt
from domainbert.report.summary import fw_level_text, interval_text, metric_label, points, signed_points, summary_lines


def std_text(row: ScoreRow) -> str:
    """The standard deviation in points; '-' for a single seed (there is no spread to show)."""
    return points(row.std) if row.n_seeds > 1 else "-"


def _n_comparisons(comparisons: list[Comparison]) -> str:
    n = sum(c.p_holm is not None for c in comparisons)
    return (
        f"{n} comparison{'s' if n != 1 else ''}; the verdicts hold the family-wise error over all of them under "
        f"{1 - comparisons[0].confidence:.0%} (Holm); detectable: the smallest true difference each design "
        "finds with 80% power at that level."
    )


def p_text(p: Any, samples: int, counted: bool = True) -> str:
    """A p-value; a Monte Carlo count ((k+1)/(B+1), never 0) at its floor, where no draw crossed 0, is a bound:
    ``< 0.0005``; one integrated over the t (``counted`` False) is a value at any size."""
    if p is None:
        return "-"
    floor = 2 / (samples + 1)
    if counted and p <= floor * (1 + 1e-9):
        return f"< {floor:.2g}"
    return f"{p:.1e}" if p < 0.0001 else (f"{p:.4f}" if p < 0.01 else f"{p:.3f}")


def _counted(c: Comparison) -> bool:
    """Whether a row's p-value is a Monte Carlo count (rows written before the t was integrated: assumed so)."""
    return c.design is None or c.design.p_counted is not False


def holm_p_text(c: Comparison, samples: int) -> str:
    """Holm's adjusted p; where the unadjusted p sits at its Monte Carlo floor (no draw crossed 0) the adjusted one
    is a bound, not a value: ``< 0.003``."""
    if c.p_holm is None:
        return "-"
    n = (c.design.n_samples if c.design else None) or samples
    at_floor = _counted(c) and c.p_value is not None and c.p_value <= 2 / (n + 1) * (1 + 1e-9)
    if at_floor and c.p_holm < 1:
        return f"< {c.p_holm:.2g}"
    return p_text(c.p_holm, n, counted=False)


def finetune_section(
    scores: list[ScoreRow],
    comparisons: list[Comparison],
    out_dir: Path,
    bootstrap_samples: int,
    tasks: list[str],
) -> Section:
    """Per task: mean, std and seeds per model with the difference to the base model; then every comparison.
    ``tasks`` (the config's) that have no results are listed as not run."""
    sec = Section("Fine-tuning results")
    if not scores:
        return sec.add(
            "Not run: no finetune/<model>/<task>/seed-*/result.json was found. Run "
            "`domainbert finetune` and re-render the report."
        )
    missing = [t for t in tasks if t not in {r.task for r in scores}]
    if missing:
        sec.add(f"Not run: task(s) {', '.join(missing)} (no results).")
    for task in dict.fromkeys(r.task for r in scores):
        sec.add(_task_table(task, [r for r in scores if r.task == task], comparisons))
    if comparisons:
        sec.add(_comparison_table(comparisons, bootstrap_samples))
    if name := figures.score_bars(scores, out_dir):
        sec.add(
            Figure(
                name,
                "Mean test score per model; error bars: one standard deviation over seeds; dots: individual seeds",
            )
        )
    return sec


def _task_table(task: str, rows_t: list[ScoreRow], comparisons: list[Comparison]) -> Table:
    """One task's models: scores over seeds, collapses and retries, and the difference to the reference."""
    label = metric_label(rows_t[0].metric)
    rows = []
    for r in rows_t:
        cmp = next(
            (c for c in comparisons if c.task == task and c.model == r.model and c.reference == reference_of(r.model)),
            None,
        )
        rows.append(
            [
                r.model,
                str(r.n_seeds),
                points(r.mean),
                std_text(r),
                ", ".join(points(v) for v in r.values),
                f"{r.collapsed}/{r.n_seeds}",
                str(r.retried),
                signed_points(cmp.diff) if cmp else "-",
                interval_text(cmp) if cmp else "-",
                cmp.verdict if cmp else ("(floor)" if r.model == "floor" else "(reference)"),
                fmt(r.train_seconds, 1),
            ]
        )
    level = round(100 * comparisons[0].confidence) if comparisons else 95
    return Table(
        [
            "model",
            "seeds",
            f"mean {label}",
            "std",
            "per seed",
            "collapsed",
            "retried",
            "diff vs base",
            f"{level}% CI",
            "verdict",
            "train s (mean)",
        ],
        rows,
        f"{task}: test {label} (x100), mean and sample standard deviation over seeds",
    )


def _comparison_table(comparisons: list[Comparison], bootstrap_samples: int) -> Table:
    """Every comparison with its interval, p-value and verdict (collapsed runs named)."""
    rows = [
        [
            f"{c.model} vs {c.reference}",
            c.task,
            runs_cell(c),
            signed_points(c.diff),
            interval_text(c),
            fw_cell(c),
            p_text(c.p_value, (c.design.n_samples if c.design else None) or bootstrap_samples, _counted(c)),
            holm_p_text(c, bootstrap_samples),
            points(c.detectable) if c.detectable is not None else "-",
            c.verdict + (" (collapsed runs involved)" if c.collapsed else ""),
        ]
        for c in comparisons
    ]
    level = round(100 * comparisons[0].confidence)
    return Table(
        [
            "comparison",
            "task",
            "runs",
            "difference (points)",
            f"{level}% CI",
            "CI at Holm's level (the verdict's)",
            "p (two-sided)",
            "p after Holm",
            "detectable (80% power)",
            "verdict",
        ],
        rows,
        f"Intervals over test examples, seeds and replicates, paired by seed where both models have runs under the "
        f"same seeds (r: the two models' correlation across them); at least {bootstrap_samples} draws, more where "
        "a p-value is near a Holm threshold; the floor is compared unpaired. " + _n_comparisons(comparisons),
    )


def runs_cell(c: Comparison) -> str:
    """How many runs a comparison used and how: ``5 pairs, r 0.96`` or ``3 v 1``."""
    if c.design is not None and c.design.paired:
        r = c.design.seed_correlation
        unit = {"seed": "pairs", "replicate": "replicate pairs", "two-way": "replicate x seed cells"}
        text = f"{c.design.units} {unit.get(c.design.pairing or 'seed', 'pairs')}"
        return text + (f", r {r:.2f}" if r is not None else "")
    return c.runs_text or str(c.n_seeds)


def fw_cell(c: Comparison) -> str:
    fw = c.family
    if fw is None or fw.level is None:
        return "-"
    return f"{signed_points(fw.low)} to {signed_points(fw.high)} ({fw_level_text(fw.level)})"


def summary_section(scores: list[ScoreRow], comparisons: list[Comparison]) -> Section:
    sec = Section("Summary")
    adequacy = task_adequacy(scores, [])
    lines = summary_lines(scores, comparisons, set(adequacy)) + list(adequacy.values())
    if not lines:
        return sec.add("No fine-tuning results yet, so no verdict: the report shows the stages that have run.")
    return sec.add(lines)


def method_section(cfg: DomainConfig, comparisons: list[Comparison]) -> Section:
    """How the comparison is made: metrics, intervals (with what one comparison drew), verdicts, floors, collapse."""
    resampled = next((c.resampled for c in comparisons if c.resampled and c.reference == "base"), None)
    method = Section("How the comparison is made").add(
        [
            "Scores are test-set metrics in points (x100): seqeval strict IOB2 micro span F1 for NER, macro-F1 for "
            "classification. Mean and sample standard deviation are over the seeds each model ran.",
            f"Each difference is model minus reference with a {round(100 * cfg.compare.confidence)}% interval that "
            "includes test-set sampling, fine-tuning seeds and, with pretraining replicates, the replicates "
            f"(at least {cfg.compare.bootstrap_samples} draws, seed {cfg.compare.seed})"
            + (f": {resampled}" if resampled else "")
            + ".",
            "Paired: a fine-tuning seed fixes the head's initialisation, the data order and dropout for every model, "
            "and moves every model's score together, so two models with runs under the same seeds are compared on "
            "their per-seed differences (r is their correlation across seeds); with pretraining replicates the "
            "replicates are the units and the seeds nest inside them (the Multi-Bootstrap of MultiBERTs, Sellam et "
            "al. 2022). The units' mean is drawn from Student-t at their degrees of freedom: 3 seeds give 2, and "
            "a difference then needs 5.7 standard errors to be found with 80% power in one comparison, 18 at "
            "Holm's first step over 10, so only more seeds make a small difference visible. The floor, one deterministic run, is compared unpaired (Welch's seed term from the model's "
            "own seeds), each mean kept inside the metric's range.",
            "p-values integrate the t exactly over each draw of the test examples, so they are Monte Carlo only "
            "in the test-sampling part; where no seed term is left they count the draws on the far side of 0 as "
            "(k + 1) / (B + 1), and one at that floor prints as a bound ('< x'). A comparison whose p-value is "
            f"near a Holm threshold, or whose bounds are unsure by more than {100 * BOUND_ERROR:g} point, draws more.",
            "Verdict: 'better' or 'worse' when the comparison survives Holm's correction over every comparison on the "
            "page, else 'no significant difference'. Beside the unadjusted interval stands the one the verdict uses, "
            "at Holm's threshold for the row (not a simultaneous interval); counted on the draws as the p-value is, "
            "it excludes 0 exactly when the verdict is 'better' or 'worse'.",
            "The floor is a simple baseline trained on exactly the training examples the models saw and scored on "
            "the same test examples: TF-IDF word 1-2-grams + logistic regression for classification, a CRF over "
            "word features for NER.",
            "A run is marked collapsed when its predictions are degenerate in either direction (one answer for "
            "nearly every example, answers distributed far from gold's, no entity, an entity on nearly every token or "
            "one span per sentence) or its training loss did not fall; "
            "a run whose validation predictions collapsed is run once more at another learning rate, and the report "
            "counts those retries.",
            "Every number on this page is read from the run's artifacts; re-rendering needs no retraining.",
        ]
    )
    if cfg.finetune.lr_chosen:
        grid = ", ".join(f"{lr:g}" for lr in cfg.finetune.lr_grid)
        chosen = "; ".join(f"{task} {lr:g}" for task, lr in cfg.finetune.lr_chosen.items())
        method.add(
            f"Each task's learning rate was chosen on validation from {grid}, by one run of base per rate (the "
            f"first seed; recipe/ in the run folder), and every model trained at it: {chosen}. The test split "
            "played no part in the choice."
        )
    if cfg.finetune.early_stopping == "reference" and cfg.finetune.stop_chosen:
        stops = "; ".join(f"{task} step {step}" for task, step in cfg.finetune.stop_chosen.items())
        method.add(
            "Each task's stopping point was chosen on validation by the reference: base's run at the chosen rate "
            "(the first seed; recipe/ in the run folder) kept its best validation evaluation, and every "
            f"fine-tuned model trained to that step on the same schedule and was scored there: {stops}. No "
            "fine-tuning run chose its own epoch; the test split played no part."
        )
    return method
