"""Tag-scheme conversion to IOB2 and label-set checks."""

from __future__ import annotations

import pytest

from domainbert.task_data.tag_schemes import check_label_set, iob2_labels, to_iob2


@pytest.mark.parametrize("tags, expected", [
    (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
    # B- in IOB1 separates two adjacent entities of the same type
    (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),
    # a type change inside a run of I- starts a new entity
    (["I-PER", "I-LOC", "I-LOC"], ["B-PER", "B-LOC", "I-LOC"]),
    (["O", "O"], ["O", "O"]),
])
def test_iob1_to_iob2(tags, expected):
    assert to_iob2(tags, "IOB1") == expected


@pytest.mark.parametrize("tags, expected", [
    (["S-PER", "O", "B-LOC", "I-LOC", "E-LOC"], ["B-PER", "O", "B-LOC", "I-LOC", "I-LOC"]),
    (["B-ORG", "E-ORG", "S-ORG"], ["B-ORG", "I-ORG", "B-ORG"]),
])
def test_bioes_to_iob2(tags, expected):
    assert to_iob2(tags, "BIOES") == expected


def test_ill_formed_iob2_is_repaired_and_counted():
    repairs = [0]
    assert to_iob2(["O", "I-PER", "I-PER", "B-LOC", "I-PER"], "IOB2", repairs) == ["O", "B-PER", "I-PER", "B-LOC",
                                                                                    "B-PER"]
    assert repairs == [2]
    assert to_iob2(["B-PER", "I-PER", "O"], "IOB2", repairs) == ["B-PER", "I-PER", "O"] and repairs == [2]
    iob1 = [0]
    to_iob2(["I-PER", "O", "I-LOC"], "IOB1", iob1)
    assert iob1 == [0]  # IOB1 opens entities with I-: the scheme, not a repair


def test_gold_file_repairs_warn_once_with_the_count(tmp_path, caplog):
    import logging

    from domainbert.config.finetune import TaskConfig
    from domainbert.task_data.splits import read_conll

    path = tmp_path / "train.conll"
    path.write_text("a\tO\nb\tI-TERM\n\nc\tI-TERM\nd\tO\n")
    cfg = TaskConfig(name="t", type="ner", format="conll", path=str(tmp_path), labels=["O", "B-TERM", "I-TERM"])
    with caplog.at_level(logging.WARNING):
        examples = read_conll(path, cfg)
    assert [ex.tags for ex in examples] == [["O", "B-TERM"], ["B-TERM", "O"]]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage() and " 2 " in warnings[0].getMessage()


def test_predictions_are_repaired_like_gold():
    import numpy as np

    from domainbert.finetune.ner import decode_ner
    from domainbert.task_data.splits import NerExample

    id2label = ["O", "B-TERM", "I-TERM"]
    logits = [np.eye(3)[[0, 0, 2, 2]]]  # positions 1..2 hold the words: O, I-TERM, I-TERM
    features = [{"word_index": [0, 1, 2], "first_positions": [1, 2, 3]}]
    examples = [NerExample(tokens=["x", "y", "z"], tags=["O", "B-TERM", "I-TERM"], where="t")]
    assert decode_ner(logits, features, examples, id2label) == [["O", "B-TERM", "I-TERM"]]


def test_converted_entities_match_seqeval_reading_of_the_source_scheme():
    from seqeval.scheme import IOB2, IOBES, Entities

    bioes = ["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "B-ORG", "E-ORG"]
    src = {(e.tag, e.start, e.end) for e in Entities([bioes], IOBES).entities[0]}
    conv = {(e.tag, e.start, e.end) for e in Entities([to_iob2(bioes, "BIOES")], IOB2).entities[0]}
    assert src == conv == {("PER", 0, 1), ("LOC", 2, 5), ("ORG", 5, 7)}


def test_iob2_label_set_from_any_scheme():
    assert iob2_labels(["O", "S-PER", "B-PER", "I-PER", "E-PER", "B-LOC"]) == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def test_label_set_checks():
    assert check_label_set(["O", "B-X", "I-X"], "IOB2") is None
    assert "must contain 'O'" in check_label_set(["B-X", "I-X"], "IOB2")
    assert "S-X" in check_label_set(["O", "S-X"], "IOB2")
    assert check_label_set(["O", "S-X", "E-X"], "BIOES") is None
