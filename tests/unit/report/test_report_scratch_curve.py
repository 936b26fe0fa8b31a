"""The from-scratch arm's masked-LM fit against continued's, as shares of their unigram bars, and the budget its
own curve says it would catch up at (``report.scratch_curve``)."""

from __future__ import annotations

import pytest

from domainbert.report.scratch_curve import ArmCurve, MetricPoint, catch_up, scratch_curve_sentences


def _power_law(tokens: list[float], scale: float = 1000.0, slope: float = -0.5) -> list[tuple[float, float]]:
    return [(t, scale * t**slope) for t in tokens]


def test_catch_up_solves_a_power_law_exactly_over_the_last_points():
    curve = [(100.0, 5.0)] + _power_law([1e3 * k for k in range(1, 9)])  # an early point the fit leaves out
    tokens, slope, points = catch_up(curve, target=1.0)
    assert points == 8 and slope == pytest.approx(-0.5, rel=1e-9)
    assert tokens == pytest.approx(1e6, rel=1e-9)  # 1000 * t^-0.5 = 1 at t = 1e6


def test_no_budget_from_a_curve_that_does_not_fall_or_is_too_short():
    assert catch_up(_power_law([1e3, 2e3, 3e3], slope=0.1), target=1.0) is None
    assert catch_up(_power_law([1e3, 2e3]), target=1.0) is None


def _run(scratch_share: float, evaluations: int = 8) -> tuple[dict, dict]:
    steps, per_step = 8, 1000
    bar = 1000.0
    final = scratch_share * bar
    records = [{"kind": "eval", "step": 0, "domain_perplexity": 30000.0}]
    # held-out perplexity 1000 * (tokens / 8000)^-0.5 * share: the last evaluation is the summary's figure
    records += [
        {"kind": "eval", "step": s, "domain_perplexity": final * (s * per_step / 8000) ** -0.5}
        for s in range(steps - evaluations + 1, steps + 1)
    ]
    records.append({"kind": "train", "step": 8, "loss": 5.0})
    pretrain = {
        "continued": {"domain_perplexity": 160.0, "unigram_perplexity": 1000.0, "tokens_consumed": 8000, "steps": 8},
        "scratch": {"domain_perplexity": final, "unigram_perplexity": bar, "tokens_consumed": 8000, "steps": 8},
        "scratch@r2": {"domain_perplexity": final, "unigram_perplexity": bar, "tokens_consumed": 8000, "steps": 8},
    }
    return pretrain, {"scratch": records}


def _sentences(pretrain: dict, metrics: dict) -> list[str]:
    """The sentences of the files' objects, each read as the report reads it."""
    return scratch_curve_sentences(
        {arm: ArmCurve.of(s) for arm, s in pretrain.items()},
        {arm: [MetricPoint.of(r) for r in records] for arm, records in metrics.items()},
    )


def test_a_scratch_arm_behind_continued_gets_the_budget_its_curve_gives():
    pretrain, metrics = _run(scratch_share=0.48)
    (sentence,) = _sentences(pretrain, metrics)  # one: the replicate is not read again
    # 480 * (t / 8000)^-0.5 = 160 at t = 8000 * (480 / 160)^2 = 72,000
    assert "0.48 of a unigram model's 1,000" in sentence and "continued, 0.16 of its own" in sentence
    assert "slope -0.50" in sentence and "about 72,000 tokens, 9.0x this run's" in sentence
    assert "not measured" in sentence


def test_a_scratch_arm_level_with_continued_or_without_a_curve():
    pretrain, metrics = _run(scratch_share=0.15)
    assert _sentences(pretrain, metrics)[0].endswith("as well as continued does.")
    pretrain, metrics = _run(scratch_share=0.4, evaluations=2)
    assert "too few held-out evaluations" in _sentences(pretrain, metrics)[0]
    del pretrain["continued"]["unigram_perplexity"]  # continued reused from a run recorded before the bar
    (sentence,) = _sentences(pretrain, metrics)
    assert "0.40 of a unigram model's 1,000" in sentence and "continued's summary records no unigram bar" in sentence
    assert "catch up with it is not said" in sentence and "tokens, " not in sentence.split("vocabulary")[1]
    del pretrain["continued"]  # no continued arm: nothing to place scratch against
    assert _sentences(pretrain, metrics) == []
