"""The typed answer of ``stats.compare_models`` (``report/model_comparison.py``): the seed table by seed and
replicate, each side's mean and spread, and the flat JSON form a study script prints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from domainbert.report.draws import Difference
from domainbert.report.model_comparison import DrawDesign, MeanStd, ModelComparison, mean_std, seed_table


def test_mean_std_has_the_sample_spread_and_refuses_no_values() -> None:
    assert mean_std([0.2, 0.4, 0.9]) == MeanStd(mean=pytest.approx(0.5), std=pytest.approx(0.360555127546), n=3)
    assert mean_std(np.array([0.3])) == MeanStd(0.3, 0.0, 1)
    with pytest.raises(ValueError, match="no values"):
        mean_std([])


def test_the_seed_table_gives_each_seed_once_and_a_replicated_seed_its_mean() -> None:
    # A ran seed 1 in two replicates (0.4 and 0.6) and seed 2; B ran seeds 2 and 3
    table = seed_table([1, 1, 2], [2, 3], np.array([0.4, 0.6, 0.7]), np.array([0.65, 0.8]))
    assert (table.seeds, table.seeds_a, table.seeds_b) == ((1, 2, 3), (1, 2), (2, 3))
    assert table.per_seed == ((1, pytest.approx(0.5), None), (2, 0.7, 0.65), (3, None, 0.8))


def _comparison() -> ModelComparison:
    design = DrawDesign(
        paired=True,
        pairing="seed",
        units=3,
        seed_correlation=0.9,
        replicates={"a": 1, "b": 1},
        se=0.01,
        df=2.0,
        n_examples=40,
        seed_sd={"a": 0.02, "b": 0.03},
        seed_df=2.0,
        method="paired by seed",
        resampled="test examples (40)",
        unit_sd=0.015,
        n_samples=400,
        p_counted=False,
    )
    return ModelComparison(
        diff=0.03,
        low=0.01,
        high=0.05,
        p_value=0.02,
        significant=True,
        verdict="continued better",
        confidence=0.95,
        model_a="continued",
        model_b="base",
        task="ner",
        metric="f1",
        n_examples=40,
        a=MeanStd(0.61, 0.02, 3),
        b=MeanStd(0.58, 0.03, 2),
        seeds=seed_table([1, 2, 3], [1, 2], np.array([0.6, 0.6, 0.63]), np.array([0.57, 0.59])),
        design=design,
        p_exact=False,
        p_error=0.001,
        bounds_error=0.0005,
        draws=Difference(np.linspace(-0.01, 0.01, 400), 0.01, 2.0),
    )


def test_the_record_is_one_flat_json_object_without_the_draws() -> None:
    comparison = _comparison()
    record = json.loads(json.dumps(comparison.record()))
    assert "draws" not in record and "design" not in record
    assert (record["se"], record["pairing"], record["unit_sd"]) == (0.01, "seed", 0.015)
    assert record["per_seed"] == [[1, 0.6, 0.57], [2, 0.6, 0.59], [3, 0.63, None]]
    assert record["a"] == {"mean": 0.61, "std": 0.02, "n": 3} and record["diff"] == 0.03
    assert (comparison.n_seeds, comparison.runs_text) == (2, "3 v 2")
    # the draws made and how the p-value was found: the design's, once, in the record and on the comparison
    assert (record["n_samples"], record["p_counted"]) == (400, False) == (comparison.n_samples, comparison.p_counted)
