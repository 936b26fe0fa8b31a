"""Almost Stochastic Order (ASO): the ``eps_min`` of Dror et al. (2019) as computed by ``deepsig.aso``.

``aso_eps(scores_a, scores_b)`` returns the upper bound on the violation ratio of "A is stochastically
larger than B" for two samples of per-seed scores (higher = better): 0 means A's score distribution lies
entirely above B's, 1 entirely below, 0.5 no order. deepsig's documentation reads ``eps_min < 0.5`` as A
better and recommends a stricter threshold (e.g. 0.2) before claiming it.

This is deepsig 1.2.8's algorithm (``deepsig.aso`` with ``num_jobs=1``) written over all bootstrap
iterations at once: deepsig evaluates its quantile functions through ``np.vectorize`` point by point,
which costs about half a second per comparison at 200 iterations, too slow for a report with many
comparisons and for the calibration test. The draws are deepsig's own (iteration ``k`` seeds the legacy
global generator with ``seed + k``; A's uniforms are drawn before B's), so with the same arguments the result
equals ``deepsig.aso``'s; ``tests/finetune/test_finetune_stats.py`` checks that against the installed deepsig.
Left out: deepsig's Bonferroni option (``num_comparisons``), parallel jobs and progress bars.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import norm


def _quantiles(sorted_scores: np.ndarray, p: np.ndarray) -> np.ndarray:
    """deepsig's empirical quantile function: ``sorted[clip(ceil(n * p) - 1, 0, n - 1)]`` along the last axis."""
    n = sorted_scores.shape[-1]
    index = np.clip(np.ceil(n * p).astype(int) - 1, 0, n - 1)
    lead = np.broadcast_shapes(sorted_scores.shape[:-1], index.shape[:-1])
    return np.take_along_axis(
        np.broadcast_to(sorted_scores, lead + (n,)), np.broadcast_to(index, lead + index.shape[-1:]), -1
    )


def violation_ratios(scores_a: np.ndarray, scores_b: np.ndarray, dt: float) -> np.ndarray:
    """deepsig's ``compute_violation_ratio`` for each row of ``scores_a`` ``[..., n_a]`` and ``scores_b`` ``[..., n_b]``."""
    t = np.arange(dt, 1, dt)
    f = _quantiles(np.sort(scores_a, -1), t)
    g = _quantiles(np.sort(scores_b, -1), t)
    diff = g - f
    w2 = np.sum(diff**2 * dt, axis=-1)
    diff = np.where(f >= g, 0.0, diff)
    violation = np.sum(diff[..., 1:] ** 2 * dt, axis=-1)  # deepsig leaves out the first grid point here
    # deepsig warns and returns 0.5 (no order) when the two quantile functions are equal.
    return np.divide(violation, w2, out=np.full_like(w2, 0.5), where=w2 != 0)


def aso_eps(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    confidence_level: float = 0.95,
    num_bootstrap_iterations: int = 1000,
    dt: float = 0.005,
    seed: int = 0,
) -> float:
    """``eps_min`` of A over B (``deepsig.aso(scores_a, scores_b, ...)`` with ``num_jobs=1``)."""
    a = np.asarray(scores_a, dtype=float)
    b = np.asarray(scores_b, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("both score lists must be non-empty")
    ratio = float(violation_ratios(a, b, dt))
    uniforms = np.empty((num_bootstrap_iterations, a.size + b.size))
    state = np.random.RandomState()  # one generator re-seeded per iteration: building one each time is slow
    for k in range(num_bootstrap_iterations):
        state.seed(seed + k + 1)
        uniforms[k] = state.uniform(0, 1, a.size + b.size)
    sampled_a = _quantiles(np.sort(a), uniforms[:, : a.size])
    sampled_b = _quantiles(np.sort(b), uniforms[:, a.size :])
    samples = violation_ratios(sampled_a, sampled_b, dt)
    const = np.sqrt(a.size * b.size / (a.size + b.size))
    sigma = np.std(const * (samples - ratio))
    return float(np.clip(ratio - sigma / const * norm.ppf(1 - confidence_level), 0, 1))
