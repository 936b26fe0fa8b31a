"""A task that cannot separate the arms (every model under the floor, or the floor at the ceiling) gets the
adequacy sentence instead of a verdict and a bold "best"."""

from __future__ import annotations

import json
from pathlib import Path

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.report.adequacy import task_adequacy
from domainbert.report.compare import render_report
from domainbert.report.inputs import load_run
from domainbert.report.rows import score_from_json
from domainbert.report.verdict import CEILING, Uninformative, uninformative_tasks
from support.report import BASE_MISSES, CONTINUED_MISSES, NER_TASK, score, write_ner_result


def _render(run: Path) -> tuple[str, str, dict[str, Uninformative], str]:
    """The page's headline and summary, the uninformative tasks of its score rows (results.json), and its
    adequacy sentence for the NER task as ``task_adequacy`` writes it from the run's results."""
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]"])
    render_report(cfg, RunLayout(run))
    md = (run / "report" / "report.md").read_text()
    scores = [score_from_json(r) for r in json.loads((run / "report" / "results.json").read_text())["scores"]]
    sentence = task_adequacy(scores, load_run(RunLayout(run)).runs).get(NER_TASK, "")
    headline = md.split("## Headline")[1].split("\n## ")[0]
    return headline, md.split("## Summary")[1].split("\n## ")[0], uninformative_tasks(scores), sentence


def test_models_under_the_floor_get_the_underfit_sentence_and_no_best(science_run: Path) -> None:
    for seed in (1, 2, 3):  # continued misses 10-12 sentences of 40, base and scratch 20-22
        write_ner_result(science_run, "continued", NER_TASK, seed, 9 + seed)
    write_ner_result(science_run, "floor", NER_TASK, 0, 6)  # F1 91.9: above every model, under the ceiling
    assert max(CONTINUED_MISSES.values()) < 6 < min(BASE_MISSES.values())  # the fixture's own continued would clear it
    headline, summary, uninformative, sentence = _render(science_run)
    why = uninformative[NER_TASK]
    assert (why.kind, why.best.model) == ("underfit", "continued") and why.floor is not None
    assert why.best.mean < why.floor.mean < CEILING
    assert sentence and sentence in headline  # the page prints the task's sentence instead of a verdict on it
    assert "a CRF over word" in sentence  # the NER task's floor, by name
    assert "Verdict: none:" in headline
    assert "**" not in headline  # no bold "best"
    assert "Highest mean" not in summary and "cannot separate the arms" in summary


def test_a_floor_at_the_ceiling_gets_the_saturated_sentence(science_run: Path) -> None:
    write_ner_result(science_run, "floor", NER_TASK, 0, 0)  # a perfect floor
    headline, _, uninformative, sentence = _render(science_run)
    assert uninformative[NER_TASK].kind == "floor-saturated"
    assert sentence in headline and "saturated" in sentence and "**" not in headline


def test_an_informative_task_keeps_its_verdict_and_best(science_run: Path) -> None:
    write_ner_result(science_run, "floor", NER_TASK, 0, 30)  # a weak floor, under every model
    headline, summary, uninformative, sentence = _render(science_run)
    assert NER_TASK not in uninformative and not sentence
    assert "cannot separate" not in headline + summary
    assert "**" in headline and "Highest mean" in summary


def test_saturation_by_every_model_near_the_ceiling() -> None:
    scores = [score("t", m, v) for m, v in (("base", 0.98), ("continued", 0.99))]
    assert uninformative_tasks(scores)["t"].kind == "saturated"
    assert "every model scores at least 97.0" in task_adequacy(scores, [])["t"]
    scores[0] = score("t", "base", 0.9)
    assert uninformative_tasks(scores) == {} and task_adequacy(scores, []) == {}


def test_runs_that_stopped_early_are_counted_and_the_patience_named_first() -> None:
    """Study 8: 6 of 10 runs stopped on a plateau of their macro-F1; the sentence says so from their results."""
    scores = [score("t", m, v, "macro_f1") for m, v in (("base", 0.50), ("floor", 0.68))]
    runs = [
        {"task": "t", "model": "base", "seed": s, "lr": 3e-4, "steps": 130 if s in (1, 3) else 13 * s,
         "stopped_early": s in (2, 4, 5)}
        for s in range(1, 6)
    ]
    runs.append({"task": "t", "model": "floor", "seed": 0, "steps": 0, "stopped_early": True})  # never counts
    sentence = task_adequacy(scores, runs)["t"]
    assert "what the floor learns" in sentence  # a floor result without its task type: not guessed
    assert "since 3 of 5 runs stopped early on validation before their last epoch" in sentence
    assert "at most 130 updates" in sentence  # the longest run's, whichever seed came first
    assert "informative: (1) more updates before early stopping may end a run (finetune.min_steps) or a longer" in sentence
    assert "last epoch; (2) more training examples or epochs; (3) a larger learning rate." in sentence
    for run in runs:
        run["stopped_early"] = False
    unstopped = task_adequacy(scores, runs)["t"]
    assert "stopped early" not in unstopped and "informative: (1) more training examples or epochs;" in unstopped


def test_a_window_that_cut_many_test_texts_is_named_with_the_count() -> None:
    """Law: 187 of 224 test licences longer than the 128 sub-tokens read, a floor that reads them whole."""
    scores = [score("t", m, v, "macro_f1") for m, v in (("base", 0.56), ("floor", 0.63))]
    cut = {"max_length": 128, "chunks": 1, "train": 1500, "validation": 180, "test": 187}
    runs = [{"task": "t", "model": "base", "seed": s, "task_type": "classification", "num_examples": {"test": 224},
             "cut_by_window": cut} for s in (1, 2)]
    sentence = task_adequacy(scores, runs)["t"]
    assert ("(3) a longer window (finetune.max_length, or more `chunks`), since 187 of 224 test examples are "
            "longer than the 128 sub-tokens the encoder reads, and the floor reads them whole.") in sentence
    runs[1]["cut_by_window"] = {**cut, "test": 190}  # another vocabulary cuts more: the most is named
    assert "since 190 of 224 test examples" in task_adequacy(scores, runs)["t"]
    runs[1]["cut_by_window"] = cut
    cut["test"] = 50  # under a quarter: not named
    assert "longer window" not in task_adequacy(scores, runs)["t"]
    cut.update(test=100, chunks=2)
    assert "longer than the 128 sub-tokens x 2 windows the encoder reads" in task_adequacy(scores, runs)["t"]
    for run in runs:  # a result recorded before the count existed, or a pair task (None): nothing said
        run["cut_by_window"] = {**cut, "test": None}
    assert "longer window" not in task_adequacy(scores, runs)["t"]
    runs[0].pop("cut_by_window")
    assert "longer window" not in task_adequacy(scores, runs)["t"]
