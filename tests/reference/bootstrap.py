"""The paired example bootstrap for any metric function: the plain loop that ``compare_models``'s count-matrix
path must reproduce when each side has one run (the same draws, so the same interval to rounding).

It calls ``metric_fn`` on every resampled test set, so it also checks that the count matrices of
``domainbert.finetune.counts`` give the library metric (seqeval, scikit-learn) on a resample, not only on the
full test set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from domainbert.report.draws import bootstrap_indices
from domainbert.report.draws import interval as _interval


def paired_bootstrap(metric_fn: Callable[[list[Any], list[Any]], float], gold: Sequence[Any], pred_a: Sequence[Any],
                     pred_b: Sequence[Any], n_samples: int = 1000, confidence: float = 0.95,
                     seed: int | list[int] = 0) -> dict[str, Any]:
    """Paired bootstrap of ``metric_fn(gold, pred_a) - metric_fn(gold, pred_b)`` over test examples.

    Args:
        metric_fn: ``(gold, pred) -> float`` on lists of per-example answers (e.g. seqeval's f1_score).
        gold: per-example gold answers.
        pred_a: model A's predictions, aligned with ``gold``.
        pred_b: model B's predictions, aligned with ``gold``.
        n_samples: bootstrap draws.
        confidence: interval level (0.95 -> 2.5th and 97.5th percentiles).
        seed: seed of the draws.

    Returns:
        The ``draws.Interval``: ``diff`` (on the full test set), ``low``/``high`` (percentile interval),
        ``p_value`` (two-sided), ``significant``, ``verdict`` ("A better", "B better" or "no significant
        difference"), ``confidence``.
    """
    gold, pred_a, pred_b = list(gold), list(pred_a), list(pred_b)
    if not (len(gold) == len(pred_a) == len(pred_b)):
        raise ValueError("gold and predictions must have the same length")
    point = metric_fn(gold, pred_a) - metric_fn(gold, pred_b)
    draws = bootstrap_indices(len(gold), n_samples, seed)
    diffs = np.empty(n_samples)
    for k, idx in enumerate(draws):
        g = [gold[i] for i in idx]
        diffs[k] = metric_fn(g, [pred_a[i] for i in idx]) - metric_fn(g, [pred_b[i] for i in idx])
    return _interval(diffs, point, confidence)
