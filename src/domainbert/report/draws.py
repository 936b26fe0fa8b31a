"""Draws of the test set, and what a comparison's distribution says: interval and p-value.

``RunScores`` turns each run's predictions into a per-example count matrix once (``finetune.counts``), so a run's
metric on a draw of the test set is ``fn(weights @ counts)``: every run of every model is scored on the SAME
draws (the test set is shared, so the examples are paired). Draws come in chunks, so that a comparison can draw
more where its p-value or bounds need it without holding one huge weight matrix; chunk 0 is exactly
``bootstrap_indices(n, size, seed)``, the draws a plain paired bootstrap makes (``tests/reference/bootstrap.py``).
Each comparison draws from its own stream, ``comparison_stream(seed, identity)``: seeded from what it compares
(models and task), so that two comparisons of a page, or of two studies, share no Monte Carlo error, and a
comparison draws the same on any page.

``Difference`` is a comparison's distribution of A - B: the example draws (test sampling) plus ``scale x t(df)``
(the seeds' or replicates' term). Its tails are integrated exactly over the t for each example draw, so only the
example term is Monte Carlo; where the example term is zero the p-value and bounds are the t's own, and where the
unit term is zero (no seed variance) they are the draws' percentile p-value and interval. ``p_value`` on draws is
the two-sided bootstrap p-value with the +1 of a Monte Carlo test, ``(k + 1) / (B + 1)`` per tail (Davison &
Hinkley 1997, 4.2), so p = 0 cannot happen: B draws resolve p down to ``2 / (B + 1)``. This module knows nothing
of seeds, models or pairing (``report.stats`` and ``report.paired`` do).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import optimize, special, stats

from domainbert.finetune.counts import count_metric, metric_of_counts
from domainbert.report.inputs import FinetuneRun, Record

NO_DIFFERENCE = "no significant difference"
# A comparison's draws go on until the smallest Holm threshold of its page is resolved: 2 / (B + 1) at most a
# tenth of alpha / m, i.e. B >= 20 m / alpha; only while its p-value is below 2 alpha can that matter.
RESOLUTION = 20


# The Monte Carlo error a bound may carry, in the metric's units (0.1 point): draws go on until the interval's
# bounds are that sure (``Difference.bounds_error``), up to ``MAX_CHUNKS`` chunks.
BOUND_ERROR = 0.001
MAX_CHUNKS = 16


def comparison_stream(seed: int, identity: Sequence[str]) -> list[int]:
    """The seed of one comparison's draws: the run's ``compare.seed`` and a hash of what it compares."""
    digest = hashlib.sha256("\x1f".join(identity).encode("utf-8")).digest()
    return [int(seed), int.from_bytes(digest[:8], "little")]


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


def bounds(diffs: np.ndarray | Difference, level: float) -> tuple[float, float]:
    """The percentile interval at ``1 - level`` on the p-value's own convention: the (K+1)-th smallest and largest
    draws, K = floor(level (B+1) / 2) - 1, so that it excludes 0 exactly when ``p_value(diffs) <= level``; where
    the draws cannot resolve ``level`` (K < 0) it is widened to include 0. A ``Difference`` gives its own."""
    if isinstance(diffs, Difference):
        return diffs.bounds(level)
    ordered = np.sort(np.asarray(diffs, dtype=float))
    k = math.floor(level * (ordered.size + 1) / 2) - 1
    if k < 0:
        return min(float(ordered[0]), 0.0), max(float(ordered[-1]), 0.0)
    return float(ordered[k]), float(ordered[ordered.size - 1 - k])


@dataclass(frozen=True)
class Interval:
    """A difference (``diff``) with its unadjusted interval at ``confidence``, two-sided p-value and reading."""

    diff: float
    low: float
    high: float
    p_value: float
    significant: bool
    verdict: str
    confidence: float


def interval(
    diffs: np.ndarray | Difference, point: float, confidence: float, names: tuple[str, str] | None = None
) -> Interval:
    """The interval, two-sided p-value and verdict (``"<name> better"`` when ``names`` are given); the interval
    excludes 0 exactly when the p-value is at most ``1 - confidence`` (``bounds``)."""
    alpha = 1.0 - confidence
    low, high = bounds(diffs, alpha)
    p = diffs.p_value() if isinstance(diffs, Difference) else p_value(diffs)
    significant = not (low <= 0.0 <= high)
    if significant:
        verdict = "A better" if point > 0 else "B better"
        if names is not None:
            verdict = f"{names[0] if point > 0 else names[1]} better"
    else:
        verdict = NO_DIFFERENCE
    return Interval(float(point), float(low), float(high), float(p), significant, verdict, confidence)


class Scores(Protocol):
    """What the paired and unpaired draws read: each run's full-test metric and its metric per chunk of draws."""

    full: np.ndarray

    def boot(self, index: int) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class Difference:
    """A - B as ``example + scale x T``: ``example`` the draws of the test-sampling part (centred on the estimate),
    ``T`` Student-t on ``df`` (None or inf: normal). ``scale`` 0: the draws alone (percentile, Monte Carlo)."""

    example: np.ndarray
    scale: float
    df: float | None
    span: float = 1.0  # a difference of two shares lies in [-span, span]; the bounds are kept there

    def __len__(self) -> int:
        return int(self.example.size)

    @property
    def monte_carlo(self) -> bool:
        """Whether the p-value is a Monte Carlo count (no unit term), not an integral over the t."""
        return self.scale <= 0

    @property
    def exact(self) -> bool:
        """Whether p-value and bounds are the t's own (no test-sampling term left)."""
        return not self.monte_carlo and float(np.ptp(self.example)) == 0.0

    @property
    def _normal(self) -> bool:
        return self.df is None or math.isinf(self.df)

    def _t_cdf(self, z: np.ndarray) -> np.ndarray:
        """The unit term's CDF: the special function scipy.stats' ``cdf`` calls, without building a frozen
        distribution on every call (a quantile's root search calls it hundreds of times)."""
        return np.asarray(special.ndtr(z) if self._normal else special.stdtr(self.df, z))

    def _t_pdf(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(stats.norm.pdf(z) if self._normal else stats.t.pdf(z, self.df))

    def cdf(self, x: float) -> float:
        return float(self._t_cdf((x - self.example) / self.scale).mean())

    def _low_tails(self) -> np.ndarray:
        """Per example draw, P(A - B <= 0) given it."""
        return self._t_cdf(-self.example / self.scale)

    def p_value(self) -> float:
        """Two-sided: ``2 min(P(D <= 0), P(D >= 0))``, the t integrated exactly per example draw."""
        if self.monte_carlo:
            return p_value(self.example)
        low = float(self._low_tails().mean())
        return min(1.0, 2.0 * min(low, 1.0 - low))

    def p_error(self) -> float:
        """The p-value's Monte Carlo standard error (0 where it is exact; the floor's resolution for draws)."""
        if self.monte_carlo:
            return 2.0 / (self.example.size + 1)
        if self.exact:
            return 0.0
        tails = self._low_tails()
        tails = tails if tails.mean() <= 0.5 else 1.0 - tails
        return float(2.0 * tails.std() / math.sqrt(tails.size))

    def bounds(self, level: float) -> tuple[float, float]:
        """The central interval at ``1 - level``: it excludes 0 exactly when ``p_value() <= level``."""
        if self.monte_carlo:
            return bounds(self.example, level)
        low, high = (self._quantile(q) for q in (level / 2, 1.0 - level / 2))
        return max(low, -self.span), min(high, self.span)

    def _quantile(self, q: float) -> float:
        t = float(special.ndtri(q) if self._normal else special.stdtrit(self.df, q))
        lo, hi = float(self.example.min()) + self.scale * t, float(self.example.max()) + self.scale * t
        if hi - lo <= 1e-15:
            return lo
        return float(optimize.brentq(lambda x: self.cdf(x) - q, lo, hi, xtol=1e-12))

    def bounds_error(self, level: float) -> float:
        """The larger Monte Carlo standard error of the two bounds at ``1 - level`` (0 where they are exact)."""
        if self.exact:
            return 0.0
        if self.monte_carlo:  # a percentile's: its draws' spread over sqrt(B) times sqrt(q (1 - q)) / density
            sd = float(self.example.std())
            return (
                sd
                * math.sqrt(level / 2 * (1 - level / 2) / self.example.size)
                / max(float(stats.norm.pdf(stats.norm.ppf(level / 2))), 1e-12)
            )
        errors = []
        for q in (level / 2, 1.0 - level / 2):
            x = self._quantile(q)
            z = (x - self.example) / self.scale
            density = float(self._t_pdf(z).mean()) / self.scale
            errors.append(float(self._t_cdf(z).std()) / math.sqrt(z.size) / max(density, 1e-300))
        return max(errors)


class RunScores:
    """Every run's metric on the full test set and on chunks of shared bootstrap draws.

    Args:
        results: runs of one task (same gold answers), any models; a result's JSON object is read as its run.
        metric: the metric's name (default: the first run's ``primary_metric``).
        seed: seed of the draws (an int, or a ``comparison_stream``).
        chunk: draws per chunk.
    """

    def __init__(
        self, results: Sequence[FinetuneRun | Record], metric: str | None, seed: int | list[int], chunk: int
    ) -> None:
        runs = [FinetuneRun.of(r) for r in results]
        first = runs[0]
        self.metric: str = metric or first.primary_metric or ("f1" if first.task_type == "ner" else "macro_f1")
        multi = first.multi_label
        labels = None
        if first.task_type != "ner" and first.counts is None:
            labels = sorted(
                {x for r in runs for rows in (r.gold or [], r.pred) for row in rows for x in (row if multi else [row])}
            )
        pairs = [self._counted(r, labels, multi) for r in runs]
        self._counts: list[np.ndarray] = [c for c, _ in pairs]
        self._fns: list[Callable[[np.ndarray], np.ndarray]] = [f for _, f in pairs]
        self.n_examples = len(self._counts[0])
        self.full = np.asarray([float(f(c.sum(0))) for c, f in pairs])
        self.seed, self.chunk = seed, chunk

    def _counted(
        self, run: FinetuneRun, labels: list[str] | None, multi: bool
    ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """A run's per-example counts and metric: from its predictions, or as a score file stores them
        (``counts``: the per-example count matrix of ``finetune.counts``, labels in sorted order)."""
        task_type = str(run.task_type)
        if run.counts is not None:
            counts = np.asarray(run.counts, dtype=float)
            return counts, metric_of_counts(task_type, self.metric, counts.shape[1], len(counts), multi)
        return count_metric(task_type, self.metric, list(run.gold or []), list(run.pred), labels, multi)

    def boot(self, index: int) -> np.ndarray:
        """``[runs, chunk]``: each run's metric on chunk ``index`` of the draws (chunk 0: ``bootstrap_indices``
        with ``seed`` itself, later chunks with ``[*seed, index]``)."""
        seed = self.seed if isinstance(self.seed, list) else [self.seed]
        draws = bootstrap_indices(self.n_examples, self.chunk, self.seed if index == 0 else [*seed, index])
        weights = np.zeros((self.chunk, self.n_examples))
        np.add.at(weights, (np.arange(self.chunk)[:, None], draws), 1.0)
        return np.stack([fn(weights @ counts) for counts, fn in zip(self._counts, self._fns, strict=True)])


def sureness_text(dist: Difference, confidence: float) -> str:
    """How sure a comparison's p-value and bounds are: exact, or their Monte Carlo standard error."""
    if dist.monte_carlo:
        p = f"the p-value a count of {len(dist):,} draws (at least {2 / (len(dist) + 1):.2g})"
    elif dist.exact:
        p = "the p-value the t's own (no test-sampling term left)"
    else:
        p = f"the p-value's Monte Carlo error {dist.p_error():.1g} over {len(dist):,} draws"
    error = dist.bounds_error(1 - confidence)
    return p + ("" if error == 0 else f", the bounds' {100 * error:.2f} points")
