"""Tag-scheme conversion to IOB2 and label-set checks."""

from __future__ import annotations

import pytest

from domainbert.finetune.tags import check_label_set, iob2_labels, to_iob2


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


def test_iob2_is_unchanged_even_when_ill_formed():
    tags = ["O", "I-PER", "B-LOC"]
    assert to_iob2(tags, "IOB2") == tags


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
