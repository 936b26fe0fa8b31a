"""Which models are compared, in which order, and how a confidence interval reads as a verdict."""

from __future__ import annotations

from domainbert.report.results import comparison_pairs, model_order, reference_of
from domainbert.report.rows import unadjusted_verdict
from domainbert.report.summary import comparison_sentence
from support.report import comparison


def test_verdict_follows_whether_the_interval_contains_zero() -> None:
    assert unadjusted_verdict(0.008, 0.034) == "better"
    assert unadjusted_verdict(-0.03, -0.001) == "worse"
    assert unadjusted_verdict(-0.002, 0.02) == "no significant difference"
    assert unadjusted_verdict(0.0, 0.0) == "no significant difference"


def test_models_are_ordered_base_arms_extra_then_frozen() -> None:
    models = ["scratch-frozen", "zzz", "scratch", "mybert", "base", "continued", "base-frozen"]
    assert model_order(models, ["continued", "extended", "scratch"], ["mybert"]) == [
        "base", "continued", "scratch", "mybert", "zzz", "base-frozen", "scratch-frozen"]


def test_pairs_compare_each_model_with_its_base_and_the_arms_head_to_head() -> None:
    assert reference_of("base") is None and reference_of("scratch-frozen") == "base-frozen"
    models = ["base", "continued", "extended", "scratch", "base-frozen", "scratch-frozen", "continued-frozen"]
    assert comparison_pairs(models) == [
        ("continued", "base"), ("extended", "base"), ("scratch", "base"),
        ("scratch-frozen", "base-frozen"), ("continued-frozen", "base-frozen"),
        ("continued", "scratch"), ("extended", "continued"), ("continued-frozen", "scratch-frozen")]
    # The two references once, as the warm-up's cost (base - original), then each arm with each; the floor last.
    assert comparison_pairs(["base", "original", "continued", "control", "floor"]) == [
        ("continued", "base"), ("control", "base"),
        ("base", "original"), ("continued", "original"), ("control", "original"),
        ("continued", "control"),
        ("base", "floor"), ("original", "floor"), ("continued", "floor"), ("control", "floor")]
    # Without results for the base model nothing is compared with it.
    assert comparison_pairs(["continued", "scratch"]) == [("continued", "scratch")]


def _row(diff: float, low: float, high: float, n_seeds: int = 3):
    return comparison(None, low, high, diff, n_seeds=n_seeds)


def test_summary_sentences_are_written_from_the_numbers() -> None:
    assert comparison_sentence(_row(0.021, 0.008, 0.034)) == (
        "continued beat base on science-terms-ner by +2.1 F1 (95% CI +0.8 to +3.4).")
    assert comparison_sentence(_row(-0.004, -0.019, 0.011)) == (
        "continued did not differ significantly from base on science-terms-ner (-0.4 F1, 95% CI -1.9 to +1.1).")
    assert comparison_sentence(_row(-0.05, -0.07, -0.0004, n_seeds=1)) == (
        "continued was worse than base on science-terms-ner by -5.0 F1 (95% CI -7.0 to 0.0); one seed only, so "
        "the interval covers test-set sampling but not seed variance.")
