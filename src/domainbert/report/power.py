"""Family-wise error and power: Holm's correction over a report's comparisons, and the smallest difference a
design can detect.

``holm`` adjusts the p-values of every comparison a page makes (arms x references x tasks x budgets), so that
the chance of any false "better" or "worse" on the page stays under ``1 - confidence`` (Holm 1979: the
smallest p is multiplied by m, the next by m - 1, ..., each kept at least as large as the one before).
``detectable_difference`` is the smallest true difference that a comparison finds with 80% power at the
family-wise level: ``(z(1 - alpha / 2m) + z(0.8)) * se``, with ``se`` the standard error of the difference, read
from a measured interval (``se_of_interval``) or built from a seed variance and a test-set size before any
result exists (``prior_se``, whose priors are stated here and printed by ``plan``). Normal quantiles throughout:
with 3 seeds the Welch-t tails of the interval make the real figure somewhat larger, never smaller.
This module renders nothing and decides no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

POWER = 0.8
# Before any result: a seed-to-seed standard deviation of one run's test score of 2 points (the shipped tasks'
# measured ones run 0.8 to 3.3 points for a model that does not collapse, bench/README.md), and two models'
# predictions that agree on 80% of the test examples' outcomes (correlation 0.8 between their per-example
# scores of 0.5 on average): the paired difference's test-sampling variance is then 2 * 0.25 * 0.2 / n.
PRIOR_SEED_SD = 0.02
PRIOR_TEST_VARIANCE_PER_EXAMPLE = 0.1


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values, in the order given (None stays None and does not count as a comparison)."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(indexed)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def z_needed(alpha: float, comparisons: int, power: float = POWER) -> float:
    """``z(1 - alpha / 2m) + z(power)``: how many standard errors a true difference must span to be found with
    ``power`` when the family-wise level ``alpha`` is shared among ``comparisons`` (Holm's first step)."""
    m = max(comparisons, 1)
    return NormalDist().inv_cdf(1 - alpha / (2 * m)) + NormalDist().inv_cdf(power)


def se_of_interval(low: float, high: float, confidence: float) -> float:
    """The standard error a two-sided interval at ``confidence`` implies (its half-width over z)."""
    return (high - low) / (2 * NormalDist().inv_cdf(0.5 + confidence / 2))


def prior_se(seed_sd: float, seeds: int, test_examples: int) -> float:
    """The standard error of a difference of two models' means over ``seeds`` runs each, scored on the same
    ``test_examples``: the seeds' variance on both sides plus the paired test-set sampling variance."""
    seed_var = 2 * seed_sd**2 / max(seeds, 1)
    test_var = PRIOR_TEST_VARIANCE_PER_EXAMPLE / max(test_examples, 1)
    return math.sqrt(seed_var + test_var)


def detectable_difference(se: float, alpha: float, comparisons: int) -> float:
    """The smallest true difference found with 80% power at family-wise level ``alpha`` over ``comparisons``."""
    return z_needed(alpha, comparisons) * se


def apply_holm(rows: list[dict[str, Any]], confidence: float) -> None:
    """Add ``p_holm``, ``holm_significant`` and ``detectable`` (the smallest difference each row's design finds
    with 80% power at the page's family-wise level) to every comparison row, in place; ``verdict`` becomes the
    family-wise one and the interval's own reading stays as ``verdict_unadjusted``."""
    alpha = 1 - confidence
    adjusted = holm([r.get("p_value") for r in rows])
    family = sum(p is not None for p in adjusted)
    for row, p in zip(rows, adjusted, strict=True):
        row["comparisons"] = family
        row["p_holm"] = p
        # applied again over a larger family (the cross-domain page), it starts from the interval's reading
        row.setdefault("verdict_unadjusted", row.get("verdict"))
        row["verdict"] = row["verdict_unadjusted"]
        if p is None or row.get("ci_low") is None:
            row["holm_significant"] = False
            row["detectable"] = None
            continue
        row["holm_significant"] = p < alpha
        se = se_of_interval(row["ci_low"], row["ci_high"], confidence)
        row["detectable"] = detectable_difference(se, alpha, family)
        if not row["holm_significant"] and row["verdict"] in ("better", "worse"):
            row["verdict"] = "no significant difference"
