"""Bootstrap draws of test examples for many runs at once, and what a set of draws says: interval and p-value.

``RunScores`` turns each run's predictions into a per-example count matrix once (``finetune.counts``), so a run's
metric on a draw of the test set is ``fn(weights @ counts)``: every run of every model is scored on the SAME
draws (the test set is shared, so the examples are paired). Draws come in chunks, so that a comparison can draw
more where its p-value is near a threshold (``draws_needed``) without holding one huge weight matrix; chunk 0
is exactly ``bootstrap_indices(n, size, seed)``, the draws a plain paired bootstrap makes
(``tests/reference/bootstrap.py``).

``p_value`` is the two-sided bootstrap p-value with the +1 of a Monte Carlo test, ``(k + 1) / (B + 1)`` per tail
(Davison & Hinkley 1997, 4.2), so p = 0 cannot happen: B draws resolve p down to ``2 / (B + 1)``.
``interval`` reads a percentile interval and the verdict from the draws. This module knows nothing of seeds,
models or pairing (``report.stats`` and ``report.paired`` do).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from domainbert.finetune.counts import count_metric, metric_of_counts

NO_DIFFERENCE = "no significant difference"
# A comparison's draws go on until the smallest Holm threshold of its page is resolved: 2 / (B + 1) at most a
# tenth of alpha / m, i.e. B >= 20 m / alpha; only while its p-value is below 2 alpha can that matter.
RESOLUTION = 20


def bootstrap_indices(n: int, n_samples: int, seed: int | list[int]) -> np.ndarray:
    """``[n_samples, n]`` example indices drawn with replacement."""
    if n < 1:
        raise ValueError("cannot bootstrap an empty test set")
    return np.random.default_rng(seed).integers(0, n, size=(n_samples, n))


def draws_needed(samples: int, alpha: float, family: int) -> int:
    """How many draws resolve the smallest Holm threshold ``alpha / family`` of a page: at least ``samples``."""
    return max(samples, math.ceil(RESOLUTION * max(family, 1) / alpha))


def p_value(diffs: np.ndarray) -> float:
    """Two-sided bootstrap p-value ``2 min((#{d <= 0} + 1) / (B + 1), (#{d >= 0} + 1) / (B + 1))``, at most 1."""
    b = diffs.size
    below, above = int(np.sum(diffs <= 0)), int(np.sum(diffs >= 0))
    return min(1.0, 2.0 * (min(below, above) + 1) / (b + 1))


def bounds(diffs: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval at ``1 - level`` on the p-value's own convention: the (K+1)-th smallest and largest
    draws, K = floor(level (B+1) / 2) - 1, so that it excludes 0 exactly when ``p_value(diffs) <= level``; where
    the draws cannot resolve ``level`` (K < 0) it is widened to include 0."""
    ordered = np.sort(np.asarray(diffs, dtype=float))
    k = math.floor(level * (ordered.size + 1) / 2) - 1
    if k < 0:
        return min(float(ordered[0]), 0.0), max(float(ordered[-1]), 0.0)
    return float(ordered[k]), float(ordered[ordered.size - 1 - k])


def interval(
    diffs: np.ndarray, point: float, confidence: float, names: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The percentile interval, two-sided p-value and verdict (``"<name> better"`` when ``names`` are given); the
    interval excludes 0 exactly when the p-value is at most ``1 - confidence`` (``bounds``)."""
    alpha = 1.0 - confidence
    low, high = bounds(diffs, alpha)
    p = p_value(diffs)
    significant = not (low <= 0.0 <= high)
    if significant:
        verdict = "A better" if point > 0 else "B better"
        if names is not None:
            verdict = f"{names[0] if point > 0 else names[1]} better"
    else:
        verdict = NO_DIFFERENCE
    return {
        "diff": float(point),
        "low": float(low),
        "high": float(high),
        "p_value": p,
        "significant": significant,
        "verdict": verdict,
        "confidence": confidence,
    }


class RunScores:
    """Every run's metric on the full test set and on chunks of shared bootstrap draws.

    Args:
        runs: result dicts of one task (same gold answers), any models.
        metric: the metric's name (default: the first run's ``primary_metric``).
        seed: seed of the draws.
        chunk: draws per chunk.
    """

    def __init__(self, runs: list[dict[str, Any]], metric: str | None, seed: int, chunk: int) -> None:
        first = runs[0]
        self.metric: str = (
            metric or first.get("primary_metric") or ("f1" if first["task_type"] == "ner" else "macro_f1")
        )
        multi = bool(first.get("multi_label", False))
        labels = None
        if first["task_type"] != "ner" and "counts" not in first:
            labels = sorted(
                {x for r in runs for rows in (r["gold"], r["pred"]) for row in rows for x in (row if multi else [row])}
            )
        pairs = [self._counted(r, labels, multi) for r in runs]
        self._counts: list[np.ndarray] = [c for c, _ in pairs]
        self._fns: list[Callable[[np.ndarray], np.ndarray]] = [f for _, f in pairs]
        self.n_examples = len(self._counts[0])
        self.full = np.asarray([float(f(c.sum(0))) for c, f in pairs])
        self.seed, self.chunk = seed, chunk

    def _counted(
        self, run: dict[str, Any], labels: list[str] | None, multi: bool
    ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """A run's per-example counts and metric: from its predictions, or as a score file stores them
        (``counts``: the per-example count matrix of ``finetune.counts``, labels in sorted order)."""
        if "counts" in run:
            counts = np.asarray(run["counts"], dtype=float)
            return counts, metric_of_counts(run["task_type"], self.metric, counts.shape[1], len(counts), multi)
        return count_metric(run["task_type"], self.metric, run["gold"], run["pred"], labels, multi)

    def boot(self, index: int) -> np.ndarray:
        """``[runs, chunk]``: each run's metric on chunk ``index`` of the draws (chunk 0: ``bootstrap_indices``
        with ``seed`` itself, later chunks with ``[seed, index]``)."""
        draws = bootstrap_indices(self.n_examples, self.chunk, self.seed if index == 0 else [self.seed, index])
        weights = np.zeros((self.chunk, self.n_examples))
        np.add.at(weights, (np.arange(self.chunk)[:, None], draws), 1.0)
        return np.stack([fn(weights @ counts) for counts, fn in zip(self._counts, self._fns, strict=True)])
