"""Calibration of compare_models on simulated scores with realistic test-set and seed variance.

Each simulated comparison draws a fresh test set of ``N_EXAMPLES`` examples with per-example difficulty,
and per model a per-example logit offset (models differ in which examples they get right). A fine-tuning
seed shifts the model's logits as a whole (the seed effect) and then draws each example's correctness
(prediction flips); a deterministic floor has one fixed draw. "No true difference" means equal expected
accuracy over examples and seeds: B's intercept is solved for on a large sample. Everything goes through the
real ``compare_models`` on result dicts (classification accuracy). The two models' seeds share nothing here,
so they are numbered apart and the comparison is unpaired (Welch's seed term).
"""

from __future__ import annotations

import numpy as np
import pytest

from domainbert.report.stats import compare_models

N_EXAMPLES = 300
N_SAMPLES = 400
SEED_SHIFT = 0.1  # logit sd of a seed's shift; with the flips, one run's accuracy sd is about 3 points
DIFFICULTY, OFFSET = 1.5, 0.8  # logit sd of example difficulty and of each model's own per-example offset
BASE = 1.0  # A's intercept: about 70% accuracy


def expected_accuracy(intercept: float, shift: float = SEED_SHIFT) -> float:
    """Accuracy expected over examples and seeds (a deterministic model: ``shift=0``)."""
    rng = np.random.default_rng(123)
    logits = intercept + rng.normal(0, DIFFICULTY, 200_000) + rng.normal(0, OFFSET, 200_000) \
        + rng.normal(0, shift, 200_000)
    return float(np.mean(1 / (1 + np.exp(-logits))))


def intercept_for(accuracy: float, shift: float) -> float:
    lo, hi = -5.0, 5.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_accuracy(mid, shift) < accuracy else (lo, mid)
    return (lo + hi) / 2


def intercept_b(difference: float, seeds_b: int | None, shift: float = SEED_SHIFT) -> float:
    """B's intercept for an expected accuracy ``difference`` below A's (seed shift ``shift`` on both sides)."""
    return intercept_for(expected_accuracy(BASE, shift) - difference, shift if seeds_b else 0.0)


def runs(model: str, correct: np.ndarray, gold: list[str], first_seed: int = 0) -> list[dict]:
    out = []
    for s, row in enumerate(correct, first_seed):
        pred = [g if c else ("x" if g == "y" else "y") for g, c in zip(gold, row, strict=True)]
        out.append({"model": model, "task": "t", "task_type": "classification", "seed": s, "gold": gold,
                    "pred": pred, "primary_metric": "accuracy", "multi_label": False})
    return out


def simulate(
    rng: np.random.Generator, intercept_b: float, seeds_b: int | None, n: int, shift: float = SEED_SHIFT
) -> dict[str, float]:
    """``n`` comparisons of A (3 seeds) with B (``seeds_b`` seeds, or a deterministic floor when None)."""
    significant, a_better, sds, outside = 0, 0, [], 0
    gold = [str(x) for x in rng.choice(["x", "y"], N_EXAMPLES)]
    for k in range(n):
        difficulty = rng.normal(0, DIFFICULTY, N_EXAMPLES)
        logit_a = BASE + difficulty + rng.normal(0, OFFSET, N_EXAMPLES)
        logit_b = intercept_b + difficulty + rng.normal(0, OFFSET, N_EXAMPLES)

        def seeded(logit, count, shift=shift):
            shifted = logit + rng.normal(0, shift, (count, 1))
            return rng.random((count, N_EXAMPLES)) < 1 / (1 + np.exp(-shifted))

        correct_a = seeded(logit_a, 3)
        # A deterministic floor: one fixed answer per example, drawn once with the example (no seed shift).
        correct_b = seeded(logit_b, 1, 0.0) if seeds_b is None else seeded(logit_b, seeds_b)
        # B's seeds share nothing with A's here (independent seed shifts), so they are not numbered alike: the
        # unpaired comparison; tests/stage/report/test_report_paired.py calibrates the paired one
        out = compare_models(runs("a", correct_a, gold), runs("b", correct_b, gold, 100), n_samples=N_SAMPLES, seed=k)
        sds.append(out.a.std)
        outside += not (-1.0 <= out.low <= out.high <= 1.0)
        significant += out.significant
        a_better += out.verdict == "a better"
    return {"rate": significant / n, "a_better": a_better / n,
            "run_sd": float(np.sqrt(np.mean(np.square(sds)))), "outside_range": outside}


@pytest.mark.parametrize("seeds_b", [3, None], ids=["3v3", "3v1-floor"])
def test_no_difference_is_rarely_significant(seeds_b):
    out = simulate(np.random.default_rng(11), intercept_b(0.0, seeds_b), seeds_b, 1000)
    print(f"no true difference, {'3 v 3 seeds' if seeds_b else '3 seeds v a floor'}: {out}")
    assert 0.01 < out["run_sd"] < 0.05  # the premise: a realistic seed-to-seed sd of one run's accuracy
    assert out["rate"] <= 0.06


@pytest.mark.parametrize("seeds_b", [3, None], ids=["3v3", "3v1-floor"])
def test_power_at_a_five_point_difference(seeds_b):
    out = simulate(np.random.default_rng(12), intercept_b(0.05, seeds_b), seeds_b, 300)
    print(f"true difference of 5 points, {'3 v 3 seeds' if seeds_b else '3 seeds v a floor'}: power {out}")
    assert out["a_better"] >= 0.2


def test_degenerate_seed_spread_stays_calibrated_and_inside_the_metrics_range():
    """A seed shift of 3 logits: some seeds of a model near chance or near perfect, one run's accuracy sd over
    15 points (a model that half-collapses). No true difference is still rarely significant, and no interval
    leaves the metric's range."""
    shift = 3.0
    out = simulate(np.random.default_rng(13), intercept_b(0.0, 3, shift), 3, 300, shift=shift)
    print(f"no true difference, 3 v 3 seeds, seed shift {shift}: {out}")
    assert out["run_sd"] > 0.15  # the premise: a degenerate spread
    assert out["rate"] <= 0.06 and out["outside_range"] == 0
