"""The page's family-wise false-positive rate, checked by simulation (a small form of study 19), and the exact
p-values and own streams of ``report.draws``.

Pages of 9 null comparisons at 3 seeds, scores uncorrelated across models, from the latent model that
``studies/scripts/false_positives.py`` fits to a committed score file: the report's p-values keep the rate at
the family-wise level, while a normal in place of the t, or the example bootstrap alone, over-reject.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from domainbert.report.draws import Difference, comparison_stream
from domainbert.report.stats import compare_models

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "studies" / "scripts"


@pytest.fixture(scope="module")
def fp(request: pytest.FixtureRequest):
    sys.path.insert(0, str(SCRIPTS))
    sys.modules.pop("false_positives", None)
    import false_positives

    request.addfinalizer(lambda: sys.path.remove(str(SCRIPTS)))
    return false_positives


def test_pages_of_true_nulls_are_false_at_most_at_the_level_and_the_over_rejecting_variants_are_caught(fp) -> None:
    task = fp.fit_task("classification-sized", fp.real_targets(*fp.REAL["classification-sized"]))
    p, _ = fp.simulate(task, seeds=3, replicates=1, rho=0.0, comparisons=900, seed=5)
    (pages, method), (_, normal), (_, examples) = fp.page_rates(p, 9)
    assert pages == 100
    # A 5% rate gives 5 of 100 pages (sd 2.2): at most 10 lets the method pass; the variants are 15-45% there.
    assert method <= 10
    assert normal > 10 and examples > 10


def test_where_the_example_term_is_zero_the_p_value_and_bounds_are_the_t_s() -> None:
    for point, scale, df in ((0.013, 0.005, 2.0), (-0.02, 0.011, 4.0), (0.004, 0.002, 9.0)):
        dist = Difference(np.full(400, point), scale, df)
        assert dist.exact and dist.p_error() == 0.0
        assert dist.p_value() == pytest.approx(2 * stats.t.sf(abs(point) / scale, df), rel=1e-9)
        low, high = dist.bounds(0.05)
        q = stats.t.ppf(0.975, df)
        assert (low, high) == pytest.approx((point - q * scale, point + q * scale), abs=1e-9)
    spread = Difference(np.linspace(0.01, 0.016, 400), 0.005, 2.0)
    assert not spread.exact and spread.p_error() > 0


def test_a_real_comparison_without_test_sampling_term_has_the_t_test_s_p() -> None:
    from domainbert.report.results import group_results
    from studies.score_files import read_scores

    _, runs = read_scores(ROOT / "studies" / "scores" / "study-0-manpages-fr-order4.json.gz")
    models = group_results(runs)["manpages-fr-order"]
    out = compare_models(models["control"], models["base"], n_samples=400)
    assert out.p_exact and out.design.pairing == "seed" and out.design.df == 9
    assert out.p_value == pytest.approx(2 * stats.t.sf(abs(out.diff) / out.design.se, 9), rel=1e-9)


def _runs(model: str, values: list[int]) -> list[dict]:
    gold = [0, 1] * 20
    return [
        {"model": model, "task": "t", "task_type": "classification", "seed": s, "primary_metric": "accuracy",
         "gold": gold, "pred": [g if (i + s + v) % 5 else 1 - g for i, g in enumerate(gold)]}
        for s, v in zip((1, 2, 3), values, strict=True)
    ]


def test_each_comparison_draws_its_own_stream_and_the_same_one_on_any_page() -> None:
    assert comparison_stream(0, ("continued", "base", "t")) != comparison_stream(0, ("control", "base", "t"))
    a, c, b = _runs("continued", [0, 1, 2]), _runs("control", [0, 1, 2]), _runs("base", [3, 1, 4])
    one, other = compare_models(a, b, n_samples=200), compare_models(c, b, n_samples=200)
    # the same scores under two names: two comparisons of one page, drawn from two streams
    assert not np.array_equal(one.draws.example, other.draws.example)
    # the same comparison on a page of 30 comparisons: its first draws are the same
    again = compare_models(a, b, n_samples=200, family=30)
    assert np.array_equal(one.draws.example[:200], again.draws.example[:200])
