"""Per-example count matrices for metrics that are sums over test examples, so a bootstrap is a matrix product.

NER micro F1 (seqeval strict IOB2) and classification accuracy, macro-F1 and multi-label micro-F1 are
functions of per-example counts summed over the test set: ``count_metric`` returns the ``[n, k]`` count
matrix of one run's predictions and the function from summed counts to the metric, so that the metric on
every bootstrap draw is ``fn(weights @ counts)``. Other metrics (e.g. token accuracy) are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _ner_counts(gold: list[list[str]], pred: list[list[str]]) -> np.ndarray:
    """Per sentence: [true positives, predicted entities, gold entities] under seqeval strict IOB2."""
    from seqeval.scheme import IOB2, Entities

    out = np.zeros((len(gold), 3))
    for i, (g, p) in enumerate(zip(gold, pred, strict=True)):
        eg = set(Entities([g], IOB2).entities[0])
        ep = set(Entities([p], IOB2).entities[0])
        out[i] = (len(eg & ep), len(ep), len(eg))
    return out


def _f1_from(tp: np.ndarray, n_pred: np.ndarray, n_true: np.ndarray) -> np.ndarray:
    denom = n_pred + n_true
    return np.divide(2 * tp, denom, out=np.zeros_like(tp, dtype=float), where=denom > 0)


def _class_counts(gold: list[Any], pred: list[Any], labels: list[str], multi_label: bool) -> np.ndarray:
    """Per example and label: [tp, fp, fn] flattened to 3*L columns."""
    index = {label: j for j, label in enumerate(labels)}
    out = np.zeros((len(gold), 3, len(labels)))
    for i, (g, p) in enumerate(zip(gold, pred, strict=True)):
        gs = set(g) if multi_label else {g}
        ps = set(p) if multi_label else {p}
        for label in gs & ps:
            out[i, 0, index[label]] += 1
        for label in ps - gs:
            out[i, 1, index[label]] += 1
        for label in gs - ps:
            out[i, 2, index[label]] += 1
    return out.reshape(len(gold), -1)


def count_metric(
    task_type: str,
    metric: str,
    gold: list[Any],
    pred: list[Any],
    labels: list[str] | None = None,
    multi_label: bool = False,
) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per-example count matrix ``[n, k]`` and a function from summed counts ``[..., k]`` to the metric.

    Supported: NER ``f1`` (micro, strict IOB2); classification ``accuracy``, ``macro_f1`` (single-label:
    over labels present in gold or predictions, as scikit-learn; multi-label: over all labels) and
    ``micro_f1``.
    """
    if task_type == "ner":
        counts = _ner_counts(gold, pred)
    elif metric == "accuracy":
        same = [
            float((sorted(g) if multi_label else g) == (sorted(p) if multi_label else p))
            for g, p in zip(gold, pred, strict=True)
        ]
        counts = np.asarray(same)[:, None]
    else:
        if labels is None:
            labels = sorted({x for rows in (gold, pred) for r in rows for x in (r if multi_label else [r])})
        counts = _class_counts(gold, pred, labels, multi_label)
    return counts, metric_of_counts(task_type, metric, counts.shape[1], len(gold), multi_label)


def metric_of_counts(
    task_type: str, metric: str, width: int, n: int, multi_label: bool = False
) -> Callable[[np.ndarray], np.ndarray]:
    """The function from summed per-example counts ``[..., width]`` to the metric (``n``: test examples), for
    counts that ``count_metric`` made (or that a study's committed score file holds)."""
    if task_type == "ner":
        if metric != "f1":
            raise ValueError(f"bootstrap of NER metric {metric!r} is not supported (use 'f1')")
        return lambda s: _f1_from(s[..., 0], s[..., 1], s[..., 2])
    if metric == "accuracy":
        return lambda s: s[..., 0] / n
    L = width // 3

    def per_label(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = s.reshape(s.shape[:-1] + (3, L))
        return s[..., 0, :], s[..., 1, :], s[..., 2, :]

    if metric == "micro_f1":

        def micro(s: np.ndarray) -> np.ndarray:
            tp, fp, fn = per_label(s)
            return _f1_from(tp.sum(-1), (tp + fp).sum(-1), (tp + fn).sum(-1))

        return micro
    if metric == "macro_f1":

        def macro(s: np.ndarray) -> np.ndarray:
            tp, fp, fn = per_label(s)
            f1 = _f1_from(tp, tp + fp, tp + fn)
            if multi_label:
                return f1.mean(-1)
            present = (tp + fp + fn) > 0  # scikit-learn's default labels: those in gold or predictions
            return np.where(present, f1, 0).sum(-1) / np.maximum(present.sum(-1), 1)

        return macro
    raise ValueError(f"bootstrap of classification metric {metric!r} is not supported")
