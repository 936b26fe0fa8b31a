"""Holm's correction and the detectable difference (domainbert.report.power)."""

from __future__ import annotations

import numpy as np
import pytest

from domainbert.report.power import apply_holm, detectable_difference, holm, prior_se, z_needed


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


def row(p: float, low: float, high: float) -> dict:
    return {"p_value": p, "ci_low": low, "ci_high": high, "verdict": "better" if low > 0 else "no significant difference"}


def test_a_lone_p_of_0_012_among_six_comparisons_is_not_significant() -> None:
    rows = [row(0.012, 0.006, 0.051)] + [row(p, -0.03, 0.03) for p in (0.3, 0.5, 0.6, 0.8, 0.9)]
    apply_holm(rows, confidence=0.95)
    assert rows[0]["verdict_unadjusted"] == "better"
    assert rows[0]["p_holm"] == pytest.approx(0.072)
    assert rows[0]["holm_significant"] is False
    assert rows[0]["verdict"] == "no significant difference"
    assert all(r["comparisons"] == 6 for r in rows)
    # alone, the same comparison survives
    alone = [row(0.012, 0.006, 0.051)]
    apply_holm(alone, confidence=0.95)
    assert alone[0]["verdict"] == "better"


def test_the_detectable_difference_shrinks_with_test_size_and_seeds() -> None:
    def mde(seeds: int, examples: int) -> float:
        return detectable_difference(prior_se(0.02, seeds, examples), 0.05, 6)

    assert mde(3, 2000) < mde(3, 200)
    assert mde(5, 200) < mde(3, 200)
    assert mde(10, 20000) < mde(5, 2000) < mde(3, 200)
    # one comparison at 5%: 1.96 + 0.84 standard errors, as every power table gives
    assert z_needed(0.05, 1) == pytest.approx(2.8016, abs=1e-3)
    # more comparisons need a larger difference
    assert detectable_difference(0.01, 0.05, 12) > detectable_difference(0.01, 0.05, 2)


def test_a_row_carries_the_detectable_difference_its_interval_implies() -> None:
    rows = [row(0.2, -0.0196, 0.0196)]  # se 0.01 at 95%
    apply_holm(rows, confidence=0.95)
    assert rows[0]["detectable"] == pytest.approx(0.028016, abs=1e-4)
