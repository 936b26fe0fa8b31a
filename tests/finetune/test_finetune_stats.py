"""Statistics: mean/std, the paired bootstrap, and compare_models' fast path against the reference."""

from __future__ import annotations

import random

import numpy as np
import pytest
from seqeval.metrics import f1_score as seqeval_f1
from seqeval.scheme import IOB2
from sklearn.metrics import accuracy_score, f1_score

from domainbert.finetune.stats import NO_DIFFERENCE, compare_models, count_metric, mean_std, paired_bootstrap

TAGS = ["O", "O", "O", "B-X", "I-X", "B-Y"]


def strict_f1(gold, pred):
    return seqeval_f1(gold, pred, mode="strict", scheme=IOB2)


def noisy(gold, rng, keep):
    return [[t if rng.random() < keep else rng.choice(TAGS) for t in g] for g in gold]


@pytest.fixture(scope="module")
def ner_data():
    rng = random.Random(3)
    gold = [[rng.choice(TAGS) for _ in range(rng.randint(2, 10))] for _ in range(120)]
    return gold, noisy(gold, rng, 0.95), noisy(gold, rng, 0.6), noisy(gold, rng, 0.6)


def test_mean_std():
    assert mean_std([1.0, 2.0, 3.0]) == {"mean": 2.0, "std": 1.0, "n": 3}
    assert mean_std([0.5]) == {"mean": 0.5, "std": 0.0, "n": 1}


def test_identical_predictions_mean_no_difference(ner_data):
    gold, good, _, _ = ner_data
    out = paired_bootstrap(strict_f1, gold, good, good, n_samples=200, seed=1)
    assert (out["diff"], out["low"], out["high"]) == (0.0, 0.0, 0.0)
    assert out["verdict"] == NO_DIFFERENCE and not out["significant"] and out["p_value"] == 1.0


def test_clearly_better_model_is_significant(ner_data):
    gold, good, bad, _ = ner_data
    out = paired_bootstrap(strict_f1, gold, good, bad, n_samples=300, seed=1)
    assert out["diff"] == pytest.approx(strict_f1(gold, good) - strict_f1(gold, bad))
    assert 0 < out["low"] <= out["diff"] <= out["high"]
    assert out["significant"] and out["verdict"] == "A better" and out["p_value"] < 0.01


def test_count_metrics_equal_the_libraries(ner_data):
    gold, good, bad, _ = ner_data
    counts, fn = count_metric("ner", "f1", gold, bad)
    assert fn(counts.sum(0)) == pytest.approx(strict_f1(gold, bad), abs=1e-12)
    rng = np.random.default_rng(0)
    labels = ["a", "b", "c", "d"]
    g = list(rng.choice(labels, 80))
    p = [x if rng.random() < 0.6 else str(rng.choice(labels[:3])) for x in g]
    counts, fn = count_metric("classification", "macro_f1", g, p)
    assert fn(counts.sum(0)) == pytest.approx(f1_score(g, p, average="macro"), abs=1e-12)
    counts, fn = count_metric("classification", "accuracy", g, p)
    assert fn(counts.sum(0)) == pytest.approx(accuracy_score(g, p))


def result(model, seed, gold, pred, task_type="ner", metric="f1"):
    return {"model": model, "task": "t", "task_type": task_type, "seed": seed, "gold": gold, "pred": pred,
            "primary_metric": metric, "multi_label": False}


def test_compare_models_single_seed_equals_reference_bootstrap(ner_data):
    gold, good, bad, _ = ner_data
    fast = compare_models([result("a", 1, gold, good)], [result("b", 1, gold, bad)], n_samples=200, seed=5)
    ref = paired_bootstrap(strict_f1, gold, good, bad, n_samples=200, seed=5)
    for key in ("diff", "low", "high", "p_value"):
        assert fast[key] == pytest.approx(ref[key], abs=1e-12)
    assert fast["verdict"] == "a better" and fast["seeds"] == [1] and "test examples (120)" in fast["resampled"]


def test_compare_models_averages_paired_seeds(ner_data):
    gold, good, bad, bad2 = ner_data
    a = [result("a", 1, gold, good), result("a", 2, gold, bad2), result("a", 9, gold, good)]
    b = [result("b", 2, gold, bad), result("b", 1, gold, bad2)]
    out = compare_models(a, b, n_samples=200, seed=0)
    assert out["seeds"] == [1, 2]  # seed 9 has no partner
    expected = ((strict_f1(gold, good) - strict_f1(gold, bad2)) + (strict_f1(gold, bad2) - strict_f1(gold, bad))) / 2
    assert out["diff"] == pytest.approx(expected, abs=1e-12)
    assert out["a"]["n"] == 2 and out["low"] <= out["diff"] <= out["high"]


def test_compare_models_classification_reference_and_errors():
    rng = np.random.default_rng(1)
    gold = [str(x) for x in rng.choice(["p", "q", "r"], 90)]
    pa = [g if rng.random() < 0.7 else "p" for g in gold]
    pb = [g if rng.random() < 0.7 else "q" for g in gold]
    fast = compare_models([result("a", 1, gold, pa, "classification", "macro_f1")],
                          [result("b", 1, gold, pb, "classification", "macro_f1")], n_samples=150, seed=2)
    ref = paired_bootstrap(lambda g, p: f1_score(g, p, average="macro"), gold, pa, pb, n_samples=150, seed=2)
    for key in ("diff", "low", "high"):
        assert fast[key] == pytest.approx(ref[key], abs=1e-12)
    with pytest.raises(ValueError, match="share no seed"):
        compare_models([result("a", 1, gold, pa)], [result("b", 2, gold, pb)])
    with pytest.raises(ValueError, match="different gold"):
        compare_models([result("a", 1, gold, pa)], [result("b", 1, gold[::-1], pb)])
