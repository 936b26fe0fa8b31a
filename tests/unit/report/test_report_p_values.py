"""How the report prints a Monte Carlo p-value: a value where the draws resolve it, a bound at their floor."""

from __future__ import annotations

from domainbert.report.finetune_sections import holm_p_text, p_text
from domainbert.report.rows import Comparison, Design, FamilyWise


def _row(p: float, p_holm: float, samples: int = 4000) -> Comparison:
    return Comparison(
        task="t",
        metric="f1",
        model="continued",
        reference="base",
        confidence=0.95,
        collapsed={},
        runs={"continued": 5, "base": 5},
        diff=0.05,
        ci_low=0.02,
        ci_high=0.08,
        n_seeds=5,
        p_value=p,
        unadjusted="better",
        design=Design(n_samples=samples),
        family=FamilyWise(comparisons=6, p_holm=p_holm, significant=p_holm <= 0.05),
    )


def test_a_p_at_the_draws_floor_prints_as_a_bound_and_its_holm_p_too() -> None:
    floor = 2 / 4001  # two-sided (k+1)/(B+1) with no draw across 0, B = 4,000
    assert p_text(floor, 4000) == "< 0.0005"
    assert holm_p_text(_row(floor, 6 * floor), 1000) == "< 0.003"  # the row's own draws (4,000), not the default


def test_a_resolved_p_prints_its_digits() -> None:
    assert p_text(0.0123, 4000) == "0.012"
    assert holm_p_text(_row(0.0123, 0.0738), 4000) == "0.074"
    # one draw above the floor is a value, not a bound
    assert not holm_p_text(_row(4 / 4001, 6 * 4 / 4001), 4000).startswith("<")
