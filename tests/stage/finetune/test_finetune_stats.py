"""Statistics: mean/std, the paired bootstrap, compare_models (fast path, seed-aware draws) and the A/A check."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import t as student_t
from seqeval.metrics import f1_score as seqeval_f1
from seqeval.scheme import IOB2
from sklearn.metrics import accuracy_score, f1_score

from domainbert.finetune.counts import count_metric
from domainbert.report.draws import RunScores, comparison_stream
from domainbert.report.stats import (
    NO_DIFFERENCE,
    MeanStd,
    SeedNoise,
    compare_models,
    mean_std,
    seed_noise_of,
)
from reference.bootstrap import paired_bootstrap
from studies.aa import aa_check

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
    assert mean_std([1.0, 2.0, 3.0]) == MeanStd(mean=2.0, std=1.0, n=3)
    assert mean_std([0.5]) == MeanStd(mean=0.5, std=0.0, n=1)


def test_identical_predictions_mean_no_difference(ner_data):
    gold, good, _, _ = ner_data
    out = compare_models([result("a", 1, gold, good)], [result("b", 1, gold, good)], n_samples=200, seed=1)
    assert (out.diff, out.low, out.high) == (0.0, 0.0, 0.0)
    assert out.verdict == NO_DIFFERENCE and not out.significant and out.p_value == 1.0


def test_clearly_better_model_is_significant(ner_data):
    gold, good, bad, _ = ner_data
    out = compare_models([result("a", 1, gold, good)], [result("b", 1, gold, bad)], n_samples=300, seed=1)
    assert out.diff == pytest.approx(strict_f1(gold, good) - strict_f1(gold, bad))
    assert 0 < out.low <= out.diff <= out.high
    assert out.significant and out.verdict == "a better" and out.p_value < 0.01


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
    # 400 draws: what the smallest Holm threshold of a one-comparison page needs, so no chunk is added
    fast = compare_models([result("a", 1, gold, good)], [result("b", 1, gold, bad)], n_samples=400, seed=5)
    ref = paired_bootstrap(strict_f1, gold, good, bad, n_samples=400, seed=comparison_stream(5, ("a", "b", "t")))
    for key in ("diff", "low", "high", "p_value"):
        assert getattr(fast, key) == pytest.approx(getattr(ref, key), abs=1e-12)
    assert fast.verdict == "a better" and fast.seeds.seeds == (1,) and "test examples (120)" in fast.design.resampled


def test_runs_under_common_seeds_are_compared_in_pairs(ner_data):
    gold, good, bad, bad2 = ner_data
    a = [result("a", 1, gold, good), result("a", 2, gold, bad2), result("a", 9, gold, good)]
    b = [result("b", 2, gold, bad), result("b", 1, gold, bad2)]
    out = compare_models(a, b, n_samples=300, seed=0)
    assert (out.seeds.seeds, out.seeds.seeds_a, out.seeds.seeds_b) == ((1, 2, 9), (1, 2, 9), (1, 2))
    fa = {1: strict_f1(gold, good), 2: strict_f1(gold, bad2), 9: strict_f1(gold, good)}
    fb = {2: strict_f1(gold, bad), 1: strict_f1(gold, bad2)}
    d = [fa[s] - fb[s] for s in (1, 2)]  # seed 9 has no partner: the pairs are the common seeds
    assert out.design.paired and out.design.pairing == "seed" and out.design.units == 2
    assert out.diff == pytest.approx(np.mean(d), abs=1e-12)
    assert out.seeds.per_seed[2] == (9, pytest.approx(fa[9]), None)
    assert out.design.seed_df == 1 and out.design.unit_sd == pytest.approx(np.std(d, ddof=1))
    assert "paired" in out.design.method and "Student-t" in out.design.resampled
    assert out.low <= out.diff <= out.high


def test_unpaired_sides_draw_welch_s_seed_term(ner_data):
    """Given seed noise (pooled elsewhere), the comparison is unpaired: Welch over the two sides' sd."""
    gold, good, bad, bad2 = ner_data
    a = [result("a", s, gold, p) for s, p in ((1, good), (2, bad2), (3, good))]
    b = [result("b", s, gold, p) for s, p in ((1, bad), (2, bad2))]
    scores = RunScores(a, None, 0, 300)
    own_a = seed_noise_of(scores.full, scores.boot(0))
    scores_b = RunScores(b, None, 0, 300)
    own_b = seed_noise_of(scores_b.full, scores_b.boot(0))
    out = compare_models(a, b, n_samples=300, seed=0, seed_noise=(own_a, own_b))
    fa, fb = [strict_f1(gold, p) for p in (good, bad2, good)], [strict_f1(gold, p) for p in (bad, bad2)]
    assert not out.design.paired and out.diff == pytest.approx(np.mean(fa) - np.mean(fb), abs=1e-12)
    va, vb = np.var(fa, ddof=1) / 3, np.var(fb, ddof=1) / 2
    assert out.design.seed_df == pytest.approx((va + vb) ** 2 / (va**2 / 2 + vb**2 / 1))
    assert "Welch" in out.design.method and "unpaired" in out.design.resampled


def test_seed_variance_widens_the_interval(ner_data):
    """A model that scores well on one seed and collapses on the others (a large seed sd) must not get the
    tight interval that test sampling alone gives."""
    gold, good, _, _ = ner_data
    empty = [["O"] * len(g) for g in gold]
    a = [result("a", 1, gold, good), result("a", 2, gold, empty), result("a", 3, gold, empty)]
    b = [result("b", s, gold, empty) for s in (1, 2, 3)]
    out = compare_models(a, b, n_samples=400, seed=1)
    examples_only = paired_bootstrap(strict_f1, gold, good, empty, n_samples=400, seed=1)
    assert out.diff == pytest.approx(strict_f1(gold, good) / 3)
    assert examples_only.significant and not out.significant and out.verdict == NO_DIFFERENCE
    assert out.high - out.low > 2 * (examples_only.high - examples_only.low)


def test_one_run_sides(ner_data):
    gold, good, bad, bad2 = ner_data
    floor = [result("floor", 0, gold, bad)]
    three = [result("a", s, gold, p) for s, p in ((1, good), (2, bad2), (3, good))]
    out = compare_models(three, floor, n_samples=300, seed=0)
    assert out.design.seed_sd == {"a": pytest.approx(out.a.std), "b": None} and out.design.seed_df == pytest.approx(2)
    assert "B has one run, taken as deterministic" in out.design.resampled
    both = compare_models([result("a", 1, gold, good)], [result("floor", 0, gold, bad)], n_samples=300, seed=0)
    assert both.design.seed_df is None and both.design.method == "paired example bootstrap"
    assert "seed variance could not be estimated" in both.design.resampled
    # a known seed sd for a one-run side: the interval reaches about as far below the difference as the t(4)
    # term alone; above, A's mean cannot pass a perfect score, so neither can the interval
    noise = SeedNoise(sd=0.05, df=4, within=0.0)
    given = compare_models([result("a", 1, gold, good)], [result("floor", 0, gold, bad)], n_samples=400, seed=0,
                           seed_noise=(noise, None))
    assert given.design.seed_sd == {"a": 0.05, "b": None} and given.design.seed_df == pytest.approx(4)
    assert given.high - given.low > both.high - both.low
    assert given.low < given.diff - 0.95 * student_t.ppf(0.975, 4) * 0.05
    assert -1.0 <= given.low and given.high <= 1.0


def test_within_noise_is_the_seed_variance_of_pure_prediction_flips():
    """Runs that differ only by independent per-example flips: all their seed variance is per-example noise,
    which the example bootstrap already sees, so ``within`` estimates ``sd**2``."""
    rng = np.random.default_rng(4)
    gold = [str(x) for x in rng.choice(["p", "q"], 400)]
    p = rng.uniform(0.2, 1.0, 400)
    runs = [result("m", s, gold, [g if c else ("q" if g == "p" else "p") for g, c in zip(gold, rng.random(400) < p, strict=True)],
                   "classification", "accuracy") for s in range(30)]
    scores = RunScores(runs, None, 0, 2000)
    noise = seed_noise_of(scores.full, scores.boot(0))
    assert noise.df == 29 and noise.within == pytest.approx(noise.sd**2, rel=0.35)
    assert noise.within == pytest.approx(np.mean(p * (1 - p)) / 400, rel=0.35)


def test_aa_check_counts_pairs_and_flags_an_unstable_model():
    rng = np.random.default_rng(2)
    gold = [str(x) for x in rng.choice(["p", "q"], 300)]

    def run(model, seed, flip):
        return result(model, seed, gold, [g if rng.random() > flip else ("q" if g == "p" else "p") for g in gold],
                      "classification", "accuracy")

    steady = [run(m, s, 0.2) for m in ("m1", "m2", "m3") for s in (1, 2, 3)]
    out = aa_check(steady, n_samples=300)
    assert (out["comparisons"], out["skipped"], len(out["groups"])) == (9, 0, 3)
    assert out["significant"] <= 1 and out["rate"] == out["significant"] / 9
    unstable = [run("wild", 1, 0.05), run("wild", 2, 0.5), run("wild", 3, 0.5)]
    out = aa_check(steady + unstable, n_samples=300)
    wild = next(g for g in out["groups"] if g["model"] == "wild")
    assert out["comparisons"] == 12 and wild["significant"] >= 2
    alone = aa_check([run("solo", s, 0.2) for s in (1, 2, 3)], n_samples=100)
    assert (alone["comparisons"], alone["skipped"], alone["rate"]) == (0, 3, None)


def test_compare_models_classification_reference_and_errors():
    rng = np.random.default_rng(1)
    gold = [str(x) for x in rng.choice(["p", "q", "r"], 90)]
    pa = [g if rng.random() < 0.7 else "p" for g in gold]
    pb = [g if rng.random() < 0.7 else "q" for g in gold]
    fast = compare_models([result("a", 1, gold, pa, "classification", "macro_f1")],
                          [result("b", 1, gold, pb, "classification", "macro_f1")], n_samples=150, seed=2)
    ref = paired_bootstrap(lambda g, p: f1_score(g, p, average="macro"), gold, pa, pb, n_samples=150,
                           seed=comparison_stream(2, ("a", "b", "t")))
    for key in ("diff", "low", "high"):
        assert getattr(fast, key) == pytest.approx(getattr(ref, key), abs=1e-12)
    unmatched = compare_models([result("a", 1, gold, pa, "classification", "macro_f1")],
                               [result("b", 2, gold, pb, "classification", "macro_f1")], n_samples=50)
    assert unmatched.seeds.seeds == (1, 2)
    with pytest.raises(ValueError, match="repeats a seed"):
        compare_models([result("a", 1, gold, pa), result("a", 1, gold, pb)], [result("b", 2, gold, pb)])
    with pytest.raises(ValueError, match="different gold"):
        compare_models([result("a", 1, gold, pa)], [result("b", 1, gold[::-1], pb)])


@pytest.mark.parametrize("runs_a", [2, 3])
def test_no_interval_leaves_the_metrics_range_whatever_the_seeds_do(ner_data, runs_a):
    """A model that collapsed to F1 0 on some seeds and scored well on others against a perfect one, and the
    reverse: a t draw at 1-2 degrees of freedom is unbounded, the interval of a difference of F1s is not."""
    gold, good, bad, _ = ner_data
    nothing = [["O"] * len(tags) for tags in gold]  # F1 0: every entity missed
    mixed = [result("a", s, gold, nothing if s % 2 else good) for s in range(1, runs_a + 1)]
    perfect = [result("b", s, gold, gold) for s in (1, 2, 3)]
    for first, second in ((mixed, perfect), (perfect, mixed)):
        out = compare_models(first, second, n_samples=400, seed=0)
        assert -1.0 <= out.low <= out.diff <= out.high <= 1.0, out
        assert out.a.std > 0.3 or out.b.std > 0.3  # the premise: a degenerate seed spread
