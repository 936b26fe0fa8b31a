"""The verdict's notes on failed runs (report/verdict.py): a recipe search in which the reference failed at every
rate, a collapsed reference against an arm at chance (never a gain), and an arm whose validation still rose at its
last evaluation. Constructed runs and rows, no model."""

from __future__ import annotations

from typing import Any

from domainbert.core.document import Document, to_markdown
from domainbert.finetune.collapse import chance_score
from domainbert.report.headline import headline_section
from domainbert.report.inputs import FinetuneRun, RunArtifacts
from domainbert.report.rows import Comparison, ScoreRow
from domainbert.report.verdict import decide, failure_notes, recipe_notes, recipe_searches, rising_notes

TASK = "topic"
GOLD = ["a"] * 5 + ["b"] * 5  # a constant answer's macro-F1: 1/3


def search_run(score: float, collapsed: bool, chance: float | None = 1 / 3) -> dict[str, Any]:
    return {
        "primary_metric": "macro_f1",
        "validation": {"macro_f1": score},
        "collapse_validation": {"collapsed": collapsed},
        "chance_validation": chance,
    }


def row(model: str, mean: float, collapsed: int = 0) -> ScoreRow:
    return ScoreRow(
        TASK, "classification", "macro_f1", model, (1, 2, 3), 3, 1, (mean,) * 3, mean, 0.0, collapsed, 0, None
    )


def better(model: str, reference: str, diff: float) -> Comparison:
    return Comparison(TASK, "macro_f1", model, reference, 0.95, {}, {}, diff, diff / 2, diff * 2, 3, 0.001, "better")


def run(model: str, seed: int, pred: list[str], best_step: int = 20, last_step: int = 30) -> FinetuneRun:
    return FinetuneRun.of(result(model, seed, pred, best_step, last_step))


def result(model: str, seed: int, pred: list[str], best_step: int = 20, last_step: int = 30) -> dict[str, Any]:
    """A fine-tuning run's ``result.json`` object."""
    history = [{"step": s, "epoch": s / 10, "validation": {}} for s in range(10, last_step + 1, 10)]
    return {
        "model": model,
        "task": TASK,
        "seed": seed,
        "task_type": "classification",
        "primary_metric": "macro_f1",
        "test": {"macro_f1": 0.3},
        "gold": GOLD,
        "pred": pred,
        "history": history,
        "best_step": best_step,
    }


def test_chance_is_the_best_constant_answer() -> None:
    assert abs(chance_score("classification", GOLD, "macro_f1") - 1 / 3) < 1e-9
    assert chance_score("classification", GOLD, "accuracy") == 0.5
    assert chance_score("ner", [["O"]], "f1") == 0.0


def test_a_reference_that_fails_at_every_searched_rate_cannot_choose_the_recipe() -> None:
    failed = {1e-5: search_run(0.30, True), 3e-5: search_run(1 / 3, False), 5e-5: search_run(0.10, True)}
    [search] = recipe_searches({TASK: failed})
    assert search.unchosen and search.chosen == 3e-5  # recipe.choose's rule: the collapsed runs rank last
    [note] = recipe_notes([search])
    assert (note.kind, note.task, note.chosen) == ("recipe-unchosen", TASK, 3e-5)
    verdict = decide([row("base", 0.3), row("continued", 0.3)], [], ["continued"], [], [], [note])
    assert [n.kind for n in verdict.notes] == ["recipe-unchosen"]
    assert verdict.note_lines[0].startswith("topic: the recipe could not be chosen on the reference:")
    assert "rule stated in advance" in verdict.note_lines[0]
    # one rate that learned (above chance, not collapsed) is a choice made on the reference
    learned = {**failed, 5e-5: search_run(0.70, False)}
    assert recipe_notes(recipe_searches({TASK: learned})) == []
    assert recipe_searches({TASK: {**failed, 5e-5: None}}) == []  # a search still running is not judged


def test_a_collapsed_reference_against_an_arm_at_chance_is_never_a_gain() -> None:
    scores = [row("base", 0.20, collapsed=3), row("continued", 0.33)]
    comparisons = [better("continued", "base", 0.13)]
    runs = [run("continued", s, ["a", "b"] * 5) for s in (1, 2, 3)]
    assert decide(scores, comparisons, ["continued"], [], []).kind == "gain"  # what the rows alone say
    notes = failure_notes(scores, comparisons, runs)
    assert [(n.kind, n.model, n.reference) for n in notes] == [("failure-difference", "continued", "base")]
    verdict = decide(scores, comparisons, ["continued"], [], [], notes)
    assert verdict.kind == "no-gain" and not verdict.winners
    assert "a difference between kinds of failure, not a gain" in verdict.note_lines[0]
    # an arm above chance against the same collapsed reference is judged as usual
    assert failure_notes([scores[0], row("continued", 0.60)], comparisons, runs) == []
    # and an arm at chance against a reference that learned is a loss or a difference, not a failure pair
    assert failure_notes([row("base", 0.20), scores[1]], comparisons, runs) == []


def test_an_arm_whose_validation_still_rises_at_its_last_evaluation_may_be_short_of_budget() -> None:
    rising = [run("continued", 1, GOLD, 30), run("continued", 2, GOLD, 30), run("continued", 3, GOLD, 10)]
    settled = [run("scratch", s, GOLD, 20) for s in (1, 2, 3)]
    notes = rising_notes(rising + settled, ["continued", "scratch"])
    assert [(n.kind, n.model, n.seeds) for n in notes] == [("budget-short", "continued", (2, 3))]
    assert notes[0].sentence.endswith("its epoch budget may be short.")
    # a single evaluation says nothing about a rise; the majority is of the seeds with a history
    assert rising_notes([run("continued", 1, GOLD, 10, 10)], ["continued"]) == []
    assert rising_notes(rising[1:], ["continued"]) == []  # 1 of 2 seeds is no majority


def test_the_headline_says_each_note_after_the_verdict_line(tmp_path) -> None:
    records = [result("continued", s, ["a", "b"] * 5, 30) for s in (1, 2, 3)]
    records += [{**result("base", s, ["a"] * 10), "collapsed": True} for s in (1, 2, 3)]
    failed = {1e-5: search_run(0.30, True), 3e-5: search_run(0.20, True)}
    arts = RunArtifacts(root=tmp_path, finetune=records)
    scores = [row("base", 0.20, collapsed=3), row("continued", 0.33)]
    section = headline_section(
        scores, [better("continued", "base", 0.13)], arts, ["continued"], [], searches=recipe_searches({TASK: failed})
    )
    text = to_markdown(Document("page", [section]))
    assert "Verdict: no adaptation arm beat the base model on any task at this budget." in text
    assert "topic: the recipe could not be chosen on the reference: base's run collapsed or stayed at chance" in text
    assert "topic: continued - base is a difference between kinds of failure, not a gain" in text
    assert "topic: continued's validation was still rising at its last evaluation (3 of 3 seeds" in text
    assert "continued: beat base" not in text and "**33.0" not in text  # nor best in bold
