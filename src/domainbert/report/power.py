"""Family-wise error and power: Holm's correction over a report's comparisons, the family-wise interval each
verdict uses, and the smallest difference a design can detect, computed one way for ``plan`` and the report.

``holm`` adjusts the p-values of every comparison a page makes (arms x references x tasks x budgets), so that
the chance of any false "better" or "worse" on the page stays under ``1 - confidence`` (Holm 1979: the
smallest p is multiplied by m, the next by m - 1, ..., each kept at least as large as the one before).
``rows.holm_adjusted`` applies it to a page's comparison rows and gives each the interval its verdict uses (not a
simultaneous interval: the last row of Holm's order gets the plain level): the percentile interval of the
row's draws (``draws.bounds``) at Holm's threshold for the row, ``alpha / (m - rank)``, or at
``alpha x p / p_holm`` where that is smaller (an earlier row stopped the step-down): it excludes 0 exactly when
``p_holm <= alpha``, by the draws' own counting. It stands beside the unadjusted interval.

``detectable_difference(se, df, alpha, m)`` is the smallest true difference a comparison finds with 80% power at
Holm's first threshold ``alpha / m``, two-sided: a noncentral t at the comparison's degrees of freedom (Cohen
1988; with 3 paired seeds, df 2, a difference needs 5.7 standard errors for one comparison and 18 at Holm's first
step over 10; with infinite df 2.8 and 3.65).
``se`` and ``df`` are the draws' (``stats.compare_models``) in the report, and ``design_se`` builds them for a
design before it runs, from the run's own results where they exist, else from the task's stated prior
(``task_prior``: ``TASK_PRIORS``, measured per task type on the shipped tasks, scaled to the task's test split;
``plan.design_power``). This module renders nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from scipy import integrate, optimize, stats

POWER = 0.8
WHOLE_SCALE = 1.0  # metrics are fractions: a detectable difference at or past this detects nothing a metric shows
NO_DIFFERENCE = "no significant difference"


@dataclass(frozen=True)
class DesignPrior:
    """What a paired comparison's standard error is made of, per unit of design (all in the metric's units).

    ``pair_sd``: sd over seeds of the difference of two models' scores under the same seed;
    ``replicate_sd``: sd of one arm's mean score between pretraining replicates;
    ``example_var``: test-sampling variance of the paired difference times the test examples (so ``/ n``).
    """

    pair_sd: float
    replicate_sd: float
    example_var: float
    source: str


@dataclass(frozen=True)
class TypePrior:
    """A task type's measured noise, at the test split it was measured on (in the metric's units):
    ``pair_sd``, the per-seed paired differences' sd; ``example_se``, the se of the test sampling left in a
    paired comparison once the seeds' spread is taken out."""

    task: str
    test_examples: int
    pair_sd: float
    example_se: float


# Measured on the committed per-run scores (studies/scores/, studies/paired-comparisons.md, the table of
# paired sd per shipped task): every model-vs-model comparison paired by seed (not the floor; none with a
# collapsed run), the median over them.
# ner: science-terms-ner, 1,952 test sentences, 7 pairs (make demo's 6 seeds and study 1's 22): sd 0.7 to 3.1
# points (median 1.4 taken); the test sampling left, se 0.0 to 0.3 points (0.15 taken).
# classification: manpages-fr-section, 304 test windows, 4 pairs (study 0's 3 and 4 seeds): sd 2.0 to 6.3 points
# (median 5.0 taken); the test sampling left, se 0.0 to 1.3 points (0.6 taken).
# Elsewhere the pair sd is scaled by sqrt(measured n / n): the noise of a test score as test sampling makes it
# (one task per type measured, so the scaling itself is assumed, not fitted).
TASK_PRIORS = {
    "ner": TypePrior("science-terms-ner", 1952, pair_sd=0.014, example_se=0.0015),
    "classification": TypePrior("manpages-fr-section", 304, pair_sd=0.050, example_se=0.006),
}
# continued's 4 pretraining replicates on science-terms-ner: their mean scores' sd 0.41 points against the pair
# sd's 1.4 (less than their 6 seeds' own noise makes, so the replicate effect is not resolved); the same share of
# the pair sd is taken for every task.
REPLICATE_SHARE = 0.4 / 1.4


def task_prior(task_type: str, test_examples: int) -> DesignPrior:
    """The stated prior of a task of ``task_type`` ("ner" or "classification") with ``test_examples`` test
    examples: its type's measured pair sd scaled by ``sqrt(measured n / n)``, the test sampling's variance per
    example as measured, the replicate sd ``REPLICATE_SHARE`` of the pair sd."""
    kind = "ner" if task_type == "ner" else "classification"
    measured = TASK_PRIORS[kind]
    n = max(test_examples, 1)
    pair_sd = measured.pair_sd * math.sqrt(measured.test_examples / n)
    where = f"measured on {measured.task}'s {measured.test_examples:,} test examples"
    if n != measured.test_examples:
        where += f", scaled to {n:,}"
    return DesignPrior(
        pair_sd=pair_sd,
        replicate_sd=pair_sd * REPLICATE_SHARE,
        example_var=measured.example_se**2 * measured.test_examples,
        source=f"prior for {kind}, {where}",
    )


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


def detectable_difference(se: float, df: float | None, alpha: float, comparisons: int, power: float = POWER) -> float:
    """The smallest true difference found with ``power`` by a two-sided test at ``alpha / comparisons`` whose
    statistic has standard error ``se`` on ``df`` degrees of freedom (None or inf: normal)."""
    level = alpha / max(comparisons, 1)
    if df is not None:
        df = max(float(df), 1.0)  # under 1 (a Satterthwaite estimate) the noncentral t has no usable power
    if df is None or math.isinf(df) or df > 1e5:
        return (NormalDist().inv_cdf(1 - level / 2) + NormalDist().inv_cdf(power)) * se
    crit = float(stats.t.ppf(1 - level / 2, df))
    hi = crit + 4.0
    while _t_power(hi, crit, df) < power:
        hi *= 2
    return float(optimize.brentq(lambda ncp: _t_power(ncp, crit, df) - power, 0.0, hi, xtol=1e-10)) * se


def detectable_range(
    se: float, df: float | None, alpha: float, comparisons: int, coverage: float = 0.95
) -> tuple[float, float] | None:
    """The detectable difference at the two ends of the ``coverage`` interval of the true se, when ``se`` was
    estimated from the run's own units on ``df`` degrees of freedom (a chi-square on ``df``); None where ``df``
    is unknown or infinite (no spread of the run's own to bound)."""
    if df is None or math.isinf(df) or df > 1e5:
        return None
    df = max(float(df), 1.0)
    tail = (1 - coverage) / 2
    low_se = se * math.sqrt(df / float(stats.chi2.ppf(1 - tail, df)))
    high_se = se * math.sqrt(df / float(stats.chi2.ppf(tail, df)))
    return (
        detectable_difference(low_se, df, alpha, comparisons),
        detectable_difference(high_se, df, alpha, comparisons),
    )


def _t_power(ncp: float, crit: float, df: float) -> float:
    """P(|T| > crit) for T noncentral t(df, ncp); integrated over the chi-square of its denominator where scipy's
    ``nct`` returns NaN (far in the tail that 3 seeds at Holm's level reach)."""
    fast = float(stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))
    if math.isfinite(fast):
        return fast

    def integrand(v: float) -> float:
        scale = crit * math.sqrt(v / df)
        return float(stats.chi2.pdf(v, df) * (stats.norm.cdf(ncp - scale) + stats.norm.cdf(-ncp - scale)))

    return float(integrate.quad(integrand, 0, math.inf, limit=200)[0])


def design_se(prior: DesignPrior, seeds: int, replicates: int, test_examples: int) -> tuple[float, float]:
    """The standard error and df of an arm's paired difference from a reference (one checkpoint) before it runs:
    with one replicate the units are seeds (``pair_sd^2 / S`` on S - 1 df); with R of them the arm's replicates
    vary and the reference's seed noise does not shrink with R (the report's two-way design, ``paired.py``):
    ``replicate_sd^2 / R + (pair_sd^2 / 2) / RS + (pair_sd^2 / 2) / S``, the pair's seed variance split evenly
    between the two sides, on R - 1 df (the report's Satterthwaite df is at least that where the rows dominate);
    plus the test sampling, on the units' df as ``stats.compare_models`` gives it."""
    seeds = max(seeds, 1)
    if replicates <= 1:
        unit_var, df = prior.pair_sd**2 / seeds, max(seeds - 1, 1)
    else:
        half = prior.pair_sd**2 / 2
        unit_var = prior.replicate_sd**2 / replicates + half / (replicates * seeds) + half / seeds
        df = replicates - 1
    total = unit_var + prior.example_var / max(test_examples, 1)
    return math.sqrt(total), (float(df) if unit_var > 0 else math.inf)
