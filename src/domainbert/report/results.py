"""The comparison numbers: per task and model, mean and standard deviation over seeds, and paired bootstrap
confidence intervals of the difference between models, with a verdict.

Every number comes from the fine-tuning ``result.json`` files (test metrics, test ``gold``/``pred``); the
statistics themselves (``mean_std``, the paired bootstrap) are ``domainbert.report.stats``. This module
decides which pairs are compared and how a comparison reads:
- every model against the general base model (``base``; a ``<model>-frozen`` run against ``base-frozen``) and,
  when the base was warmed up, against the checkpoint it came from (``original``): an arm must beat the better
  of the two references to count as a gain (``best_reference``);
- ``continued`` against ``scratch`` and ``extended`` against ``continued`` (the questions the arms exist for),
  and each corpus arm against ``control`` (the same tokens of general text): the domain's own effect;
- every model against the ``floor`` (a bag-of-words or CRF baseline trained on the same examples), when present.
Runs marked ``collapsed`` are counted per model and carried into every comparison row that involves them, so
no sentence can state such a difference without saying so.
A difference is significant when it survives Holm's correction over every comparison of the page
(``rows.holm_adjusted``: the family-wise error stays under 1 - confidence); otherwise the verdict is "no
significant difference". Each row keeps its unadjusted interval and reading, and the smallest difference its
design can detect. ``build_tables`` is the one place the rows (``rows.ScoreRow``, ``rows.Comparison``) are built;
this module writes no sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from domainbert.report.inputs import FinetuneRun, Record
from domainbert.report.model_comparison import DESIGN_FIELDS, Design
from domainbert.report.rows import (
    NOT_COMPARED,
    Comparison,
    ScoreRow,
    holm_adjusted,
    unadjusted_verdict,
)

if TYPE_CHECKING:
    from domainbert.report.stats import ModelComparison

BASE_MODEL = "base"
ORIGINAL_MODEL = "original"  # the checkpoint before the base warm-up (finetune.jobs.ORIGINAL)
REFERENCES = (BASE_MODEL, ORIGINAL_MODEL)
FLOOR_MODEL = "floor"  # the bag-of-words / CRF baseline on the same examples (finetune/floors.py)
FROZEN_SUFFIX = "-frozen"
PRIMARY_METRIC = {"ner": "f1", "classification": "macro_f1"}
METRIC_LABEL = {
    "f1": "F1",
    "macro_f1": "macro-F1",
    "accuracy": "accuracy",
    "precision": "precision",
    "recall": "recall",
}
# Head-to-head pairs beyond "each against base": (better-if-positive, reference).
# DSP's questions: does TAPT add to DAPT, does curation beat repetition, does TAPT rival DAPT.
ARM_PAIRS = [
    ("continued", "scratch"),
    ("extended", "continued"),
    ("dapt-tapt", "continued"),
    ("dapt-tapt", "tapt"),
    ("curated-tapt", "tapt"),
    ("tapt", "continued"),
    # the domain's own effect: the same start and tokens, domain text against general text
    ("continued", "control"),
    ("extended", "control"),
]

# compare_fn(runs_a, runs_b, metric, family) -> the comparison (``stats.ModelComparison``, read once by
# ``_comparison_row``); family: the page's number of comparisons (draws enough for its Holm thresholds).
# default_compare_fn wraps stats.compare_models (paired by seed where both sides have seeds in common).
CompareFn = Callable[[list[FinetuneRun], list[FinetuneRun], str, int], "ModelComparison"]


def default_compare_fn(samples: int, confidence: float, seed: int) -> CompareFn:
    """The comparison of ``domainbert.report.stats`` with the run's compare settings."""

    def compare(runs_a: list[FinetuneRun], runs_b: list[FinetuneRun], metric: str, family: int) -> ModelComparison:
        from domainbert.report import stats

        return stats.compare_models(
            runs_a, runs_b, n_samples=samples, confidence=confidence, seed=seed, metric=metric, family=family
        )

    return compare


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0.0 for one value), as ``domainbert.report.stats`` computes them."""
    from domainbert.report import stats

    out = stats.mean_std(values)
    return out.mean, out.std


def primary_metric(result: Record | FinetuneRun) -> str:
    """The metric a task is judged on: span F1 for NER, macro-F1 for classification."""
    run = FinetuneRun.of(result)
    return str(run.primary_metric or PRIMARY_METRIC[run.task_type or "classification"])


def test_score(result: Record | FinetuneRun, metric: str) -> float:
    return FinetuneRun.of(result).scores[metric]


def model_order(models: Iterable[str], arms: list[str], extra: list[str]) -> list[str]:
    """base first, then the arms in config order, then extra models, then anything else by name;
    each frozen variant right after the other variants of its order group."""
    known = [BASE_MODEL, ORIGINAL_MODEL, *arms, *extra]

    def key(name: str) -> tuple[int, int, str]:
        frozen = name.endswith(FROZEN_SUFFIX)
        stem = name[: -len(FROZEN_SUFFIX)] if frozen else name
        rank = known.index(stem) if stem in known else len(known) + (1 if name == FLOOR_MODEL else 0)
        return int(frozen), rank, name

    return sorted(set(models), key=key)


def reference_of(model: str) -> str | None:
    """The model a model is compared with first: the base model of the same mode (none for the floor)."""
    frozen = model.endswith(FROZEN_SUFFIX)
    base = BASE_MODEL + (FROZEN_SUFFIX if frozen else "")
    return None if model in (base, FLOOR_MODEL) else base


def comparison_pairs(models: list[str]) -> list[tuple[str, str]]:
    """(model, reference) pairs to test, in report order; only pairs whose two models both have results:
    each model against the base, then against the original checkpoint (the base too: the warm-up's cost), the
    arms' head-to-head pairs, then each model against the floor. Each pair once: the original checkpoint is
    compared with the base only as base - original, so Holm's family does not count that claim twice."""
    present = set(models)
    pairs = [
        (m, ref)
        for m in models
        if (ref := reference_of(m)) in present and m.removesuffix(FROZEN_SUFFIX) != ORIGINAL_MODEL
    ]
    for m in models:
        original = ORIGINAL_MODEL + (FROZEN_SUFFIX if m.endswith(FROZEN_SUFFIX) else "")
        if original in present and m not in (original, FLOOR_MODEL):
            pairs.append((m, original))
    for suffix in ("", FROZEN_SUFFIX):
        pairs += [(a + suffix, b + suffix) for a, b in ARM_PAIRS if a + suffix in present and b + suffix in present]
    if FLOOR_MODEL in present:
        pairs += [(m, FLOOR_MODEL) for m in models if m != FLOOR_MODEL]
    return pairs


def collapsed_runs(runs: Sequence[Record | FinetuneRun]) -> int:
    """How many of a model's runs on a task collapsed (``collapsed`` in result.json, finetune/collapse.py)."""
    return sum(1 for r in runs if FinetuneRun.of(r).collapsed)


def group_runs(results: Sequence[Record | FinetuneRun]) -> dict[str, dict[str, list[FinetuneRun]]]:
    """task -> model -> runs sorted by replicate and seed; a pretraining replicate's runs (``continued@r2``) are
    its arm's, marked with their ``replicate``."""
    grouped: dict[str, dict[str, list[FinetuneRun]]] = {}
    for run in map(FinetuneRun.of, results):
        grouped.setdefault(run.task, {}).setdefault(run.model, []).append(run)
    for by_model in grouped.values():
        for runs in by_model.values():
            runs.sort(key=lambda r: (r.replicate, r.seed))
    return grouped


def group_results(results: Sequence[Record]) -> dict[str, dict[str, list[Record]]]:
    """``group_runs`` of results as a file holds them (a study's score file), each as its JSON object."""
    grouped: dict[str, dict[str, list[Record]]] = {}
    for record in map(FinetuneRun.marked, results):
        grouped.setdefault(record["task"], {}).setdefault(record["model"], []).append(record)
    for by_model in grouped.values():
        for runs in by_model.values():
            runs.sort(key=lambda r: (int(r.get("replicate") or 1), int(r["seed"])))
    return grouped


def page_family(results: Sequence[Record | FinetuneRun], arms: list[str], extra: list[str]) -> int:
    """How many comparisons ``build_tables`` makes of ``results``: Holm's family of a page that shows them alone."""
    grouped = group_runs(results)
    return sum(len(comparison_pairs(model_order(by_model, arms, extra))) for by_model in grouped.values())


def build_tables(
    results: Sequence[Record | FinetuneRun],
    task_order: list[str],
    arms: list[str],
    extra: list[str],
    compare_fn: CompareFn,
    confidence: float,
    family: int | None = None,
) -> tuple[list[ScoreRow], list[Comparison]]:
    """Score rows (one per task and model) and comparison rows (one per compared pair and task).

    Args:
        results: fine-tuning runs (``inputs.FinetuneRun``), or their JSON objects (``result.json``, a study's
            score file), read as runs.
        task_order: tasks in config order (others follow by name).
        arms: pretraining arms in config order; extra: extra model names in config order.
        compare_fn: the paired comparison (see ``default_compare_fn``).
        confidence: the interval's confidence level (for the row labels).
        family: the page's comparisons when it shows more than these (the cross-domain page): every
            comparison draws enough for that page's smallest Holm threshold; default ``page_family``.

    Returns:
        (score_rows, comparison_rows), the comparisons Holm-corrected over ``family``; scores are in the metric's
        own unit (fractions for F1).
    """
    grouped = group_runs(results)
    tasks = [t for t in task_order if t in grouped] + sorted(t for t in grouped if t not in task_order)
    scores: list[ScoreRow] = []
    comparisons: list[Comparison] = []
    family = family or page_family(results, arms, extra)
    for task in tasks:
        by_model = grouped[task]
        models = model_order(by_model, arms, extra)
        first = next(iter(by_model.values()))[0]
        metric = primary_metric(first)
        scores += [_score_row(task, first, metric, model, by_model[model]) for model in models]
        comparisons += [
            _comparison_row(task, metric, (a, b), by_model, compare_fn, confidence, family)
            for a, b in comparison_pairs(models)
        ]
    return scores, holm_adjusted(comparisons, confidence)


def best_reference(scores: list[ScoreRow], task: str) -> str | None:
    """The reference an arm must beat on ``task``: the higher mean of ``base`` and ``original`` (None: neither)."""
    rows = [r for r in scores if r.task == task and r.model in REFERENCES]
    return max(rows, key=lambda r: (r.mean, r.model == BASE_MODEL)).model if rows else None


def _score_row(task: str, first: FinetuneRun, metric: str, model: str, runs: list[FinetuneRun]) -> ScoreRow:
    """One model's scores on one task over its runs."""
    values = [r.scores[metric] for r in runs]
    mean, std = mean_std(values)
    seconds = [r.train_seconds for r in runs if r.train_seconds is not None]
    return ScoreRow(
        task=task,
        task_type=first.task_type,
        metric=metric,
        model=model,
        seeds=tuple(sorted({r.seed for r in runs})),
        n_seeds=len({r.seed for r in runs}),
        replicates=len({r.replicate for r in runs}),
        values=tuple(values),
        mean=mean,
        std=std,
        collapsed=collapsed_runs(runs),
        retried=sum(1 for r in runs if r.retried),
        train_seconds=sum(seconds) / len(seconds) if seconds else None,
    )


def _comparison_row(
    task: str,
    metric: str,
    models: tuple[str, str],
    by_model: dict[str, list[FinetuneRun]],
    compare_fn: CompareFn,
    confidence: float,
    family: int,
) -> Comparison:
    """``model_a`` against ``model_b`` on one task: the difference, its interval and the interval's reading."""
    model_a, model_b = models
    collapsed = {m: collapsed_runs(by_model[m]) for m in (model_a, model_b) if collapsed_runs(by_model[m])}
    runs = {m: len(by_model[m]) for m in (model_a, model_b)}
    try:
        stat = compare_fn(by_model[model_a], by_model[model_b], metric, family)
    except ValueError as exc:
        # e.g. no common seed, or a different test set: say so on the page instead of failing it.
        return Comparison(
            task,
            metric,
            model_a,
            model_b,
            confidence,
            collapsed,
            runs,
            None,
            None,
            None,
            0,
            None,
            NOT_COMPARED,
            reason=str(exc),
        )
    design = stat.design
    return Comparison(
        task=task,
        metric=metric,
        model=model_a,
        reference=model_b,
        confidence=confidence,
        collapsed=collapsed,
        runs=runs,
        diff=stat.diff,
        ci_low=stat.low,
        ci_high=stat.high,
        n_seeds=stat.n_seeds,
        p_value=stat.p_value,
        unadjusted=unadjusted_verdict(stat.low, stat.high),
        runs_text=stat.runs_text,
        resampled=design.resampled,
        design=Design(**{k: getattr(design, k) for k in DESIGN_FIELDS}),  # what the file keeps of it
        draws=stat.draws,
    )
