"""Collapse detection (constant predictions, no entities, a loss that did not fall) and the stage's retry."""

from __future__ import annotations

import json

import pytest

from domainbert.core.paths import RunLayout
from domainbert.finetune import attempts
from domainbert.finetune.collapse import diagnose, kept_attempt
from domainbert.finetune.stage import finetune_one
from support.finetune import make_cfg


def test_constant_classifier_is_collapsed_and_a_varied_one_is_not():
    gold = ["a", "b", "c", "a"] * 10
    out = diagnose("classification", gold, ["a"] * 40)
    assert out["collapsed"] and out["top_share"] == 1.0 and "'a' for 100%" in out["reasons"][0]
    assert not diagnose("classification", gold, ["a", "b", "a", "c"] * 10)["collapsed"]
    # 39 of 40 the same answer is still a collapse; when gold itself is that skewed it is not.
    assert diagnose("classification", gold, ["a"] * 39 + ["b"])["collapsed"]
    assert not diagnose("classification", ["a"] * 40, ["a"] * 40)["collapsed"]


def test_tagger_that_predicts_no_entity_is_collapsed():
    gold = [["B-T", "O", "O"], ["O", "B-T", "I-T"]] * 20
    assert diagnose("ner", gold, [["O"] * 3] * 40)["collapsed"]
    assert diagnose("ner", gold, [["O"] * 3] * 40)["entity_share"] == 0.0
    assert not diagnose("ner", gold, [["B-T", "O", "O"], ["O", "O", "O"]] * 20)["collapsed"]


def _sentences(seed: int, n: int = 60) -> list[list[str]]:
    """Gold-like IOB2 sentences: 6-14 words, about one entity of 1-3 words per sentence."""
    import random

    rng, out = random.Random(seed), []
    for _ in range(n):
        tags = ["O"] * rng.randint(6, 14)
        start, length = rng.randrange(len(tags) - 3), rng.randint(1, 3)
        tags[start : start + length] = ["B-T"] + ["I-T"] * (length - 1)
        out.append(tags)
    return out


def test_a_tagger_that_tags_every_token_is_collapsed():
    gold = _sentences(1)
    every_token_b = [["B-T"] * len(s) for s in gold]  # 18x the gold entities
    out = diagnose("ner", gold, every_token_b)
    assert out["collapsed"] and out["entity_share"] > 3 and out["tagged_share"] == 1.0
    assert any("an entity on nearly every token" in r for r in out["reasons"])


def test_a_tagger_that_makes_each_sentence_one_span_is_collapsed_whatever_the_repair():
    gold = _sentences(2)
    # every word I-T: the I-after-O repair reads one sentence-long entity per sentence (as many as gold has)
    every_word_i = [["I-T"] * len(s) for s in gold]
    repaired = [["B-T"] + ["I-T"] * (len(s) - 1) for s in gold]
    for pred in (every_word_i, repaired):
        out = diagnose("ner", gold, pred)
        assert out["collapsed"] and out["whole_sentence_spans"] == 1.0
        assert 0.5 < out["entity_share"] < 2  # the entity count alone would not have told
        assert any("spans the whole sentence" in r for r in out["reasons"])


def test_an_imperfect_but_healthy_tagger_is_not_collapsed():
    gold = _sentences(3)
    other = _sentences(4, n=len(gold))  # right rates, wrong places: a poor tagger, not a degenerate one
    pred = [(o + ["O"] * len(g))[: len(g)] for g, o in zip(gold, other, strict=True)]
    assert not diagnose("ner", gold, pred)["collapsed"]
    assert not diagnose("ner", gold, gold)["collapsed"]


def test_answers_distributed_far_from_gold_are_collapsed_in_either_direction():
    gold = ["a", "b", "c", "d"] * 25
    mostly_a = ["a"] * 90 + ["b"] * 10  # under the 95% constant share, far from gold's uniform spread
    out = diagnose("classification", gold, mostly_a)
    assert out["collapsed"] and out["label_distance"] == pytest.approx(0.65)
    assert "distributed far from gold's" in out["reasons"][0]
    rare = ["a"] * 90 + ["b"] * 10
    gold_skewed = ["a"] * 10 + ["b"] * 90
    assert diagnose("classification", gold_skewed, rare)["collapsed"]  # the opposite skew
    two_of_four = ["a", "b"] * 50  # half the classes never predicted: distance 0.5, a weak model
    assert not diagnose("classification", gold, two_of_four)["collapsed"]


def test_loss_that_did_not_fall_is_collapsed():
    gold, pred = ["a", "b"] * 10, ["a", "b"] * 10
    out = diagnose("classification", gold, pred, loss_start=1.0, loss_end=0.95)
    assert out["collapsed"] and "did not fall" in out["reasons"][0]
    assert not diagnose("classification", gold, pred, loss_start=1.0, loss_end=0.4)["collapsed"]


def test_multi_label_constant_sets_are_collapsed():
    gold = [["a"], ["b"], ["a", "b"], []] * 5
    assert diagnose("classification", gold, [["a"]] * 20, multi_label=True)["collapsed"]


@pytest.mark.slow
def test_collapsed_run_is_retried_at_a_lower_rate_and_recorded(tmp_path, tiny_bert, tasks_dir):  # noqa: F811
    # A learning rate this high sends the tiny model to one class; the retry runs at a tenth of it.
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.lr=0.5", "finetune.epochs=1",
                   "finetune.collapse_retry_lr_factor=0.1")
    layout = RunLayout(tmp_path / "run")
    res = finetune_one(cfg, layout, "base", str(tiny_bert), "cls", 1)
    assert res["retry"] is not None and res["retry"]["first"]["lr"] == 0.5 and res["lr"] == pytest.approx(0.05)
    assert res["retry"]["first"]["reasons"]
    on_disk = json.loads((layout.finetune("base", "cls", 1) / "result.json").read_text())
    assert on_disk["retry"]["lr"] == pytest.approx(0.05) and "collapsed" in on_disk and "collapse" in on_disk
    # Both attempts are on record with the one kept; the kept one is the result.
    kept = on_disk["retry"]["kept"]
    assert kept in ("first", "retry") and on_disk["retry"]["second"]["lr"] == pytest.approx(0.05)
    assert on_disk["validation"] == on_disk["retry"]["second" if kept == "retry" else "first"]["validation"]
    no_retry = make_cfg(tiny_bert, tasks_dir, "finetune.lr=0.5", "finetune.epochs=1",
                        "finetune.collapse_retry_lr_factor=null")
    res2 = finetune_one(no_retry, RunLayout(tmp_path / "run2"), "base", str(tiny_bert), "cls", 1)
    assert res2["retry"] is None and res2["collapsed"] and res2["lr"] == 0.5


def _attempt(collapsed: bool, score: float) -> dict:
    return {"collapse_validation": {"collapsed": collapsed}, "validation": {"macro_f1": score}}


def test_the_kept_attempt_is_decided_on_validation():
    # A retry that collapses again and scores lower does not replace the first attempt (study 0's control, seed 5:
    # a loss that did not fall at 1e-4 with mixed predictions, then one class at 3e-4).
    assert kept_attempt(_attempt(True, 0.45), _attempt(True, 0.34), "macro_f1") == "first"
    assert kept_attempt(_attempt(True, 0.34), _attempt(True, 0.45), "macro_f1") == "retry"
    # An attempt that did not collapse wins over one that did, whatever their scores.
    assert kept_attempt(_attempt(True, 0.60), _attempt(False, 0.40), "macro_f1") == "retry"
    assert kept_attempt(_attempt(False, 0.40), _attempt(True, 0.60), "macro_f1") == "first"
    assert kept_attempt(_attempt(True, 0.5), _attempt(True, 0.5), "macro_f1") == "retry"  # a tie keeps the retry


@pytest.mark.slow
def test_a_kept_first_attempt_keeps_its_model_and_scores(tmp_path, tiny_bert, tasks_dir, monkeypatch):  # noqa: F811
    # The rule is tested above; here, the stage's plumbing when it keeps the first attempt: its scores and rate
    # are the result, its model is the one saved, and the retry's staged model is gone.
    monkeypatch.setattr(attempts, "kept_attempt", lambda first, retry, metric: "first")
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.lr=0.5", "finetune.epochs=1",
                   "finetune.collapse_retry_lr_factor=0.1", "finetune.save_models=all")
    layout = RunLayout(tmp_path / "run")
    res = finetune_one(cfg, layout, "base", str(tiny_bert), "cls", 1)
    assert res["retry"]["kept"] == "first" and res["lr"] == 0.5
    assert res["validation"] == res["retry"]["first"]["validation"]
    assert res["retry"]["second"]["lr"] == pytest.approx(0.05)
    folder = layout.finetune("base", "cls", 1)
    assert (folder / "model").is_dir()
    assert not [p for p in folder.parent.rglob("*retry*")]
