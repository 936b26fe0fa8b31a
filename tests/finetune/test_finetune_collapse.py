"""Collapse detection (constant predictions, no entities, a loss that did not fall) and the stage's retry."""

from __future__ import annotations

import json

import pytest
from test_finetune_stage import make_cfg, tasks_dir  # noqa: F401 - the shared task fixture

from domainbert.core.paths import RunLayout
from domainbert.finetune.collapse import diagnose
from domainbert.finetune.stage import finetune_one


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
    no_retry = make_cfg(tiny_bert, tasks_dir, "finetune.lr=0.5", "finetune.epochs=1",
                        "finetune.collapse_retry_lr_factor=null")
    res2 = finetune_one(no_retry, RunLayout(tmp_path / "run2"), "base", str(tiny_bert), "cls", 1)
    assert res2["retry"] is None and res2["collapsed"] and res2["lr"] == 0.5
