"""The verdict's references: an arm must beat the better of base (warmed up) and original (the checkpoint
before the warm-up); the warm-up's cost and the control's domain effect are stated."""

from __future__ import annotations

import json
from pathlib import Path

from domainbert.report.references import (
    against_best_reference,
    arm_tally,
    arm_verdicts,
    control_sentences,
    reference_sentences,
    references_row,
    seed_warning,
)
from domainbert.report.results import best_reference, build_tables, default_compare_fn
from domainbert.report.rows import Comparison, ScoreRow, score_from_json
from support.report import NER_TASK, comparison, score, write_ner_result

# misses out of 40 sentences per seed: the warm-up cost the encoder (base misses more than original); continued
# and control recover part of it, equally
MISSES = {"original": (4, 5, 6), "base": (20, 21, 22), "continued": (11, 12, 13), "control": (11, 12, 13)}


def tables(tmp_path: Path) -> tuple[list[ScoreRow], list[Comparison]]:
    results = []
    for model, misses in MISSES.items():
        for seed, m in zip((1, 2, 3), misses, strict=True):
            write_ner_result(tmp_path, model, NER_TASK, seed, m)
            results.append(json.loads((tmp_path / "finetune" / model / NER_TASK / f"seed-{seed}" / "result.json").read_text()))
    return build_tables(results, [NER_TASK], ["continued", "control"], [], default_compare_fn(400, 0.95, 0), 0.95)


def test_an_arm_that_beats_the_warmed_base_but_not_the_original_is_no_gain(tmp_path: Path) -> None:
    scores, comparisons = tables(tmp_path)
    assert best_reference(scores, NER_TASK) == "original"
    vs_base = next(c for c in comparisons if (c.model, c.reference) == ("continued", "base"))
    assert vs_base.verdict == "better"  # what the old verdict called a gain
    (judged,) = against_best_reference(scores, comparisons, "continued")
    assert (judged.reference, judged.verdict) == ("original", "worse") and judged.family.significant
    tally = arm_tally(scores, comparisons, "continued")
    assert tally["better"] == [] and tally["worse"] == [judged]
    (line,) = arm_verdicts(scores, comparisons, ["continued"])
    assert line.startswith("continued: was worse than original") and "beat" not in line


def test_the_warm_up_cost_and_the_domain_effect_are_stated(tmp_path: Path) -> None:
    scores, comparisons = tables(tmp_path)
    warm_up = references_row(comparisons, NER_TASK)  # base - original: what the warm-up did
    assert warm_up is not None and warm_up.diff < 0 and warm_up.verdict == "worse"
    (cost,) = reference_sentences(scores, comparisons)
    assert "a measured cost" in cost and cost.endswith("the better of the two, original.")
    control = next(c for c in comparisons if (c.model, c.reference) == ("continued", "control"))
    assert control.diff == 0.0 and control.ci_low <= 0 <= control.ci_high and control.verdict == "no significant difference"
    (effect,) = control_sentences(scores, comparisons, ["continued"])
    assert effect.endswith("no significant domain effect.")
    # every comparison is in one family: arms x references x control
    assert {c.comparisons for c in comparisons} == {len(comparisons)}


def test_after_a_warm_up_the_report_expects_and_renders_the_original(science_run: Path) -> None:
    from domainbert.config.domain import load_domain
    from domainbert.core.artifacts import atomic_output
    from domainbert.core.paths import RunLayout
    from domainbert.report.compare import render_report

    with atomic_output(science_run / "pretrain" / "base-warmup" / "model", config={}, fp="warm") as tmp:
        (tmp / "config.json").write_text("{}")  # the warm-up made the base: the checkpoint is a second reference
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]",
                                  "finetune.only_tasks=[science-terms-ner]"])
    render_report(cfg, RunLayout(science_run))
    md = (science_run / "report" / "report.md").read_text()
    assert "Incomplete: original: results missing" in md  # expected, and missing until fine-tuned
    for seed, misses in ((1, 1), (2, 2), (3, 3)):  # the checkpoint beats every model
        write_ner_result(science_run, "original", NER_TASK, seed, misses)
    render_report(cfg, RunLayout(science_run))
    md = (science_run / "report" / "report.md").read_text()
    assert "| original |" in md.split("## Headline")[1].split("##")[0]  # a row of the headline table
    tables = json.loads((science_run / "report" / "results.json").read_text())
    assert best_reference([score_from_json(r) for r in tables["scores"]], NER_TASK) == "original"
    assert "beat the better reference (original)" in md.split("## Headline")[1].split("Verdict:")[1]
    assert "the verdict's reference is the better of the two, original." in md
    assert "continued: did not differ significantly from the better reference on science-terms-ner (original: " in md


def test_a_model_short_of_the_configured_seeds_is_named_as_missing_runs_not_as_too_few_seeds():
    scores = [score("t", "base", 0.5, n_seeds=3), score("t", "scratch", 0.5, n_seeds=1), score("t", "floor", 0.4, n_seeds=1)]
    (line,) = seed_warning(scores, configured=3)
    assert line.startswith("Runs missing: scratch on t (1 of 3) seeds have results") and "give finetune.seeds" not in line
    (line,) = seed_warning([score("t", "base", 0.5, n_seeds=2)], configured=2)
    assert "give finetune.seeds at least 3 values" in line
    assert seed_warning(scores[:1], configured=3) == []


def test_when_continued_and_scratch_both_ran_the_verdict_answers_which_did_better(tmp_path: Path) -> None:
    from domainbert.report.references import scratch_sentences

    misses = {"base": (10, 11, 12), "continued": (9, 10, 11), "scratch": (30, 31, 33)}
    results = []
    for model, counts in misses.items():
        for seed, m in zip((1, 2, 3), counts, strict=True):
            write_ner_result(tmp_path, model, NER_TASK, seed, m)
            results.append(json.loads((tmp_path / "finetune" / model / NER_TASK / f"seed-{seed}" / "result.json").read_text()))
    scores, comparisons = build_tables(
        results, [NER_TASK], ["continued", "scratch"], [], default_compare_fn(400, 0.95, 0), 0.95
    )
    row = next(c for c in comparisons if (c.model, c.reference) == ("continued", "scratch"))
    assert row.diff > 0 and row.family.significant and row.verdict == "better"
    (line,) = scratch_sentences(comparisons, ["continued", "scratch"])
    assert line.endswith("continued pretraining did better.")
    # without both arms there is no such question
    assert scratch_sentences(comparisons, ["continued"]) == []
    assert scratch_sentences(comparisons, ["scratch"]) == []


def test_an_interval_over_every_difference_the_metric_allows_says_it_bounds_nothing() -> None:
    """A few widely scattered seeds give a t term the draws clip to the score's range: -100 to +100 points, as
    the untuned lexicon domain's usage NER printed at 3 seeds (studies/new-domain.md)."""
    from domainbert.report.summary import ci_text

    row = comparison(None, -0.99996, 1.0)
    assert ci_text(row) == "95% CI -100.0 to +100.0, every difference the metric allows: these runs bound nothing"
    one_end = comparison(None, -0.3, 1.0)
    assert ci_text(one_end) == "95% CI -30.0 to +100.0"
