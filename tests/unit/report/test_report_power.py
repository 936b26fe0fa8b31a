"""Holm's correction and the detectable difference (domainbert.report.power, rows.holm_adjusted)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from domainbert.report.power import (
    TASK_PRIORS,
    DesignPrior,
    design_se,
    detectable_difference,
    holm,
    task_prior,
)
from domainbert.report.rows import holm_adjusted
from support.report import comparison


def holm_rejections(p: list[float], alpha: float) -> set[int]:
    """Holm's step-down procedure as published: reject the sorted hypotheses while p(k) <= alpha / (m - k)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected: set[int] = set()
    for k, i in enumerate(order):
        if p[i] > alpha / (len(p) - k):
            break
        rejected.add(i)
    return rejected


def test_holm_adjusted_values_known_by_hand() -> None:
    # sorted: 0.01 * 4, 0.02 * 3 = 0.06, 0.03 * 2 = 0.06, 0.04 * 1; each kept at least the one before
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([None, 0.5, None]) == [None, 0.5, None]  # a missing p is no comparison: m is 1
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 0.8 * 2 caps at 1, and 0.9 may not fall below it


def test_holm_agrees_with_the_step_down_procedure() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        m = int(rng.integers(1, 12))
        p = [float(x) for x in rng.uniform(0, 0.1, size=m)]
        adjusted = holm(p)
        assert {i for i, q in enumerate(adjusted) if q is not None and q <= 0.05} == holm_rejections(p, 0.05)


def test_a_lone_p_of_0_012_among_six_comparisons_is_not_significant() -> None:
    given = [comparison(0.012, 0.006, 0.051)] + [comparison(p, -0.03, 0.03) for p in (0.3, 0.5, 0.6, 0.8, 0.9)]
    rows = holm_adjusted(given, confidence=0.95)
    first = rows[0].family
    assert first is not None and rows[0].unadjusted == "better"
    assert first.p_holm == pytest.approx(0.072) and first.significant is False
    assert rows[0].verdict == "no significant difference"
    assert all(r.comparisons == 6 for r in rows)
    # the family-wise interval, at the level Holm's step gives the row, includes 0 as its verdict says
    assert first.low < 0 < first.high and first.level == pytest.approx(1 - 0.05 / 6)
    # new rows: the ones given keep their interval's reading and no family-wise part
    assert given[0].family is None and given[0].verdict == "better"
    # alone, the same comparison survives
    alone = holm_adjusted([comparison(0.012, 0.006, 0.051)], confidence=0.95)
    assert alone[0].verdict == "better" and alone[0].family.low > 0
    # over a larger family (the cross-domain page) it starts again from the interval's reading
    again = holm_adjusted(rows[:1], confidence=0.95)
    assert again[0].verdict == "better" and again[0].comparisons == 1


def design(seeds: int, examples: int, replicates: int = 1) -> float:
    return detectable_difference(*design_se(task_prior("ner", examples), seeds, replicates, examples), 0.05, 6)


def test_the_detectable_difference_shrinks_with_test_size_seeds_and_replicates() -> None:
    assert design(3, 2000) < design(3, 200)
    assert design(5, 200) < design(3, 200)
    assert design(10, 20000) < design(5, 2000) < design(3, 200)
    assert design(5, 2000, replicates=6) < design(5, 2000, replicates=3)
    # more comparisons need a larger difference
    assert detectable_difference(0.01, None, 0.05, 12) > detectable_difference(0.01, None, 0.05, 2)


def test_the_detectable_difference_is_the_noncentral_t_power_of_the_standard_tables() -> None:
    # infinite df: 1.96 + 0.84 standard errors, as every power table gives
    assert detectable_difference(1.0, None, 0.05, 1) == pytest.approx(2.8016, abs=1e-3)
    # a paired t-test on 3 seeds (df 2) at 5%: 80% power needs a noncentral parameter of about 5.7
    d = detectable_difference(1.0, 2, 0.05, 1)
    crit = stats.t.ppf(0.975, 2)
    assert stats.nct.sf(crit, 2, d) + stats.nct.cdf(-crit, 2, d) == pytest.approx(0.8, abs=1e-6)
    assert 5.5 < d < 5.8
    # the same design at Holm's first step over 10 comparisons: far more, which is why 3 seeds cannot answer
    assert detectable_difference(1.0, 2, 0.05, 10) > 2.5 * d


def test_the_prior_depends_on_the_task_type_and_its_test_split() -> None:
    ner = task_prior("ner", 1952)
    # science-terms-ner's measured figures, as they were measured
    assert (ner.pair_sd, ner.replicate_sd) == (pytest.approx(0.014), pytest.approx(0.004))
    assert ner.source == "prior for ner, measured on science-terms-ner's 1,952 test examples"
    section = task_prior("classification", 304)
    assert section.pair_sd == pytest.approx(TASK_PRIORS["classification"].pair_sd)
    # a 304-example macro-F1 is far noisier than a 1,952-sentence NER F1: wider prior, larger detectable difference
    assert section.pair_sd > 3 * ner.pair_sd and section.example_var / 304 > ner.example_var / 1952
    assert design_se(section, 4, 1, 304)[0] > 3 * design_se(ner, 4, 1, 1952)[0]
    # scaled to another test split by sqrt(measured n / n), and saying so
    small = task_prior("ner", 488)
    assert small.pair_sd == pytest.approx(2 * ner.pair_sd) and small.replicate_sd == pytest.approx(2 * 0.004)
    assert small.source == "prior for ner, measured on science-terms-ner's 1,952 test examples, scaled to 488"
    assert task_prior("classification", 1216).pair_sd == pytest.approx(section.pair_sd / 2)


def test_the_prior_design_is_exactly_a_paired_t_over_seeds_plus_test_sampling() -> None:
    prior = DesignPrior(pair_sd=0.01, replicate_sd=0.0, example_var=0.0, source="t")
    se, df = design_se(prior, 5, 1, 1000)
    assert (se, df) == (pytest.approx(0.01 / 5**0.5), 4)
    with_test = DesignPrior(pair_sd=0.01, replicate_sd=0.0, example_var=0.2, source="t")
    se2, df2 = design_se(with_test, 5, 1, 1000)
    assert se2 == pytest.approx((0.01**2 / 5 + 0.2 / 1000) ** 0.5) and df2 == 4  # the units' df


def test_a_row_carries_the_detectable_difference_its_se_and_df_imply() -> None:
    rows = holm_adjusted([comparison(0.2, -0.0196, 0.0196, se=0.01, df=4.0)], confidence=0.95)
    assert rows[0].detectable == pytest.approx(detectable_difference(0.01, 4.0, 0.05, 1))
    no_se = holm_adjusted([comparison(0.2, -0.0196, 0.0196)], confidence=0.95)  # no se: the interval's, normal
    assert no_se[0].detectable == pytest.approx(0.028016, abs=1e-4)


def test_every_family_wise_interval_agrees_with_its_verdict() -> None:
    """Pages of rows with real draws: the interval at the row's Holm level excludes 0 exactly when the claim
    survives Holm, rows whose p sits on a threshold included (the interval counts the draws as the p-value does)."""
    from domainbert.report.draws import p_value

    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(60):
        rows = []
        for _ in range(int(rng.integers(2, 12))):
            draws = rng.normal(rng.normal(0, 2.2), 1.0, 20000)
            rows.append(comparison(p_value(draws), float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)),
                                   float(draws.mean()), se=1.0, draws=draws))
        for r in holm_adjusted(rows, confidence=0.95):
            fw = r.family
            excludes = fw.low > 0 or fw.high < 0
            assert excludes == fw.significant, r
            assert (r.verdict != "no significant difference") == fw.significant
            assert fw.high - fw.low >= r.ci_high - r.ci_low - 1e-9  # never narrower than 95%
            checked += 1
    assert checked > 200


def test_the_interval_and_the_p_value_count_the_draws_alike_at_the_threshold() -> None:
    from domainbert.report.draws import interval

    for below in range(20, 31):  # 999 draws: p <= 0.05 exactly while at most 24 of them are <= 0
        draws = np.concatenate([-np.arange(1, below + 1, dtype=float), np.arange(1, 1000 - below, dtype=float)])
        out = interval(draws, 1.0, 0.95)
        assert out.significant == (out.p_value <= 0.05) == (below <= 24), below


def test_a_satterthwaite_df_under_one_is_taken_as_one() -> None:
    assert detectable_difference(1.0, 0.35, 0.05, 6) == pytest.approx(detectable_difference(1.0, 1.0, 0.05, 6))
