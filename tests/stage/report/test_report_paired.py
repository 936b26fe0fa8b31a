"""Paired comparisons (domainbert.report.paired through stats.compare_models) on simulated seed-correlated scores.

A fine-tuning seed is simulated as what it is in the trainer: one draw of head initialisation, data order and
dropout shared by every model fine-tuned under it. Here a seed shifts both models' logits by the same amount and
draws each example's correctness from the same uniform numbers for both (common random numbers), so the two
models' scores move together across seeds (r about 0.9), as the demo's arms do (r = 0.97-1.00).
"""

from __future__ import annotations

import numpy as np
import pytest

from domainbert.report.paired import pairing, unit_variance
from domainbert.report.stats import compare_models

N = 400
SEED_SHIFT = 0.35  # logit sd of a seed's shift, shared by both models: one run's accuracy sd about 4 points


def runs(model: str, correct: np.ndarray, gold: list[str], seeds: list[int], replicate: int = 1) -> list[dict]:
    out = []
    for s, row in zip(seeds, correct, strict=True):
        pred = [g if c else ("x" if g == "y" else "y") for g, c in zip(gold, row, strict=True)]
        out.append({"model": model, "task": "t", "task_type": "classification", "seed": s, "gold": gold, "pred": pred,
                    "primary_metric": "accuracy", "replicate": replicate})
    return out


def simulate(rng: np.random.Generator, difference: float, seeds: int) -> tuple[list[dict], list[dict]]:
    """Two models over the same ``seeds``, each with its own per-example strengths (equal on average when
    ``difference`` is 0: no two runs are alike) and B's logits lower by ``difference``; a seed shifts both and
    draws 70% of each example's outcome from numbers both models share."""
    gold = [str(x) for x in rng.choice(["x", "y"], N)]
    logit = 1.0 + rng.normal(0, 1.5, N)
    own_a, own_b = rng.normal(0, 0.5, N), rng.normal(0, 0.5, N)
    shift = rng.normal(0, SEED_SHIFT, (seeds, 1))
    shared = rng.random((seeds, N))
    uniform_b = np.where(rng.random((seeds, N)) < 0.7, shared, rng.random((seeds, N)))
    a = shared < 1 / (1 + np.exp(-(logit + own_a + shift)))
    b = uniform_b < 1 / (1 + np.exp(-(logit + own_b - difference + shift)))
    names = list(range(1, seeds + 1))
    return runs("a", a, gold, names), runs("b", b, gold, names)


def unpaired(b: list[dict]) -> list[dict]:
    """The same runs, numbered so that no seed is shared: the comparison cannot pair them."""
    return [{**r, "seed": r["seed"] + 100} for r in b]


def test_pairing_cancels_the_shared_seed_effect():
    a, b = simulate(np.random.default_rng(0), 0.1, 5)
    paired = compare_models(a, b, n_samples=1000, seed=1)
    apart = compare_models(a, unpaired(b), n_samples=1000, seed=1)
    assert paired.design.paired and not apart.design.paired and paired.diff == pytest.approx(apart.diff)
    assert paired.design.seed_correlation > 0.8  # the premise: the seed moves both models together
    assert (apart.high - apart.low) > 2 * (paired.high - paired.low)
    assert paired.design.se < apart.design.se / 2


@pytest.mark.parametrize("seeds", [3, 5])
def test_paired_comparison_is_calibrated_and_more_powerful(seeds):
    rng = np.random.default_rng(seeds)
    null = []
    for k in range(300):
        a, b = simulate(rng, 0.0, seeds)
        assert any(x["pred"] != y["pred"] for x, y in zip(a, b, strict=True))  # the premise: two models, not one
        out = compare_models(a, b, n_samples=400, seed=k)
        null.append(out.p_value <= 0.05)
    assert np.mean(null) <= 0.07
    found, found_apart = 0, 0
    for k in range(100):
        a, b = simulate(rng, 0.3, seeds)  # about 5 points of accuracy
        found += compare_models(a, b, n_samples=400, seed=k).verdict == "a better"
        found_apart += compare_models(a, unpaired(b), n_samples=400, seed=k).verdict == "a better"
    print(f"{seeds} seeds, 5 points: found {found} of 100 paired, {found_apart} unpaired")
    assert found > 2 * found_apart + 10


def test_no_p_value_is_zero_and_a_far_difference_reads_below_the_page_s_smallest_threshold():
    a, b = simulate(np.random.default_rng(3), 1.5, 5)  # far apart: no draw crosses 0
    one = compare_models(a, b, n_samples=200, seed=0)
    assert 0 < one.p_value < 2 / (one.n_samples + 1)  # the t integrated exactly: below any count's floor
    page = compare_models(a, b, n_samples=200, seed=0, family=30)
    assert 0 < page.p_value < 0.05 / 30 / 5  # resolved at the page's smallest Holm threshold


def test_replicates_are_the_units_and_seeds_nest_inside_them():
    rng = np.random.default_rng(5)
    gold = [str(x) for x in rng.choice(["x", "y"], N)]
    logit = 1.0 + rng.normal(0, 1.5, N)
    seeds = [1, 2, 3]
    shift = rng.normal(0, SEED_SHIFT, (3, 1))
    uniform = rng.random((3, N))
    a, b = [], []
    for rep in (1, 2, 3):
        for model, out, bump in (("a", a, rng.normal(0, 0.2)), ("b", b, rng.normal(0, 0.2))):
            correct = uniform < 1 / (1 + np.exp(-(logit + bump + shift)))
            out += runs(model, correct, gold, seeds, rep)
    both = compare_models(a, b, n_samples=400)
    assert both.design.pairing == "replicate" and both.design.units == 3 and both.design.replicates == {"a": 3, "b": 3}
    score = {(r["model"], r["replicate"], r["seed"]): np.mean([p == g for p, g in zip(r["pred"], gold, strict=True)])
             for r in a + b}
    g = [np.mean([score[("a", rep, s)] - score[("b", rep, s)] for s in seeds]) for rep in (1, 2, 3)]
    assert both.design.seed_df == 2 and both.diff == pytest.approx(np.mean(g))
    # an arm with replicates against a one-checkpoint reference: rows (replicates) and columns (seeds)
    reference = [{**r, "model": "ref", "replicate": 1} for r in b if r["replicate"] == 1]
    two_way = compare_models(a, reference, n_samples=400)
    assert two_way.design.pairing == "two-way" and two_way.design.replicates == {"a": 3, "b": 1}
    pair = pairing(sorted(a, key=lambda r: (r["replicate"], r["seed"])), reference)
    grid = np.array([[score[("a", rep, s)] - score[("b", 1, s)] for s in seeds] for rep in (1, 2, 3)])
    var, df = unit_variance(pair, grid)
    rows, cols = grid.shape
    ms_r = cols * grid.mean(1).var(ddof=1)
    ms_c = rows * grid.mean(0).var(ddof=1)
    resid = grid - grid.mean(1, keepdims=True) - grid.mean(0, keepdims=True) + grid.mean()
    ms_e = (resid**2).sum() / ((rows - 1) * (cols - 1))
    assert var == pytest.approx(max(ms_r + ms_c - ms_e, ms_r) / (rows * cols))
    assert df > 0
