"""Overlap between vocabularies: exact values on hand-built vocabularies, across token styles."""

from __future__ import annotations

import pytest

from domainbert.vocab.overlap import ReferenceForms, canonical_forms, comparable, decode_bytelevel
from domainbert.vocab.reference_vocabs import describe, wordpiece_from_vocab

REF = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "the", "run", "##s", "##ed", "cat", "dog"]


@pytest.fixture
def ref() -> ReferenceForms:
    return ReferenceForms(describe(wordpiece_from_vocab(REF, lowercase=True), "ref"))


def test_wordpiece_overlap_matches_hand_count(ref):
    domain = ["[PAD]", "[UNK]", "the", "##s", "run", "##ing", "xyz", "##run"]
    out = ref.compare(comparable(domain, "wordpiece", {"[PAD]", "[UNK]"}))
    # comparable domain tokens: the ##s run ##ing xyz ##run (6); in the reference: the ##s run (3)
    assert out["domain_tokens"] == 6 and out["shared"] == 3
    assert out["domain_in_reference"] == pytest.approx(3 / 6)
    # reference comparable tokens: the run ##s ##ed cat dog (6; specials and [unused0] left out); in domain: 3
    assert out["reference_tokens"] == 6
    assert out["reference_in_domain"] == pytest.approx(3 / 6)
    # position ignored: ##run matches run
    assert out["surface_domain_in_reference"] == pytest.approx(4 / 6)
    assert ref.missing(comparable(domain, "wordpiece", set())) == ["##ing", "xyz", "##run"]


def test_sentencepiece_domain_against_wordpiece_reference(ref):
    domain = ["<pad>", "<unk>", "\u2581the", "s", "\u2581run", "ing", "\u2581"]
    out = ref.compare(comparable(domain, "metaspace", {"<pad>", "<unk>"}))
    # the bare marker and the specials are left out: forms (w,the) (c,s) (w,run) (c,ing) -> 3 of 4 in BERT's
    assert out["domain_tokens"] == 4
    assert out["domain_in_reference"] == pytest.approx(3 / 4)


def test_bytelevel_forms():
    assert canonical_forms("\u0120the", "bytelevel") == (("w", "the"),)
    assert canonical_forms("the", "bytelevel") == (("w", "the"), ("c", "the"))
    assert decode_bytelevel("\u00c3") is None  # half of a two-byte UTF-8 character
    assert canonical_forms("\u00c3", "bytelevel") == ()
    assert decode_bytelevel("\u00c3\u00a9") == "\u00e9"
    assert canonical_forms("##ing", "wordpiece") == (("c", "ing"),)
    assert canonical_forms("##", "wordpiece") == (("w", "##"),)


def test_cased_domain_tokens_are_folded_for_an_uncased_reference(ref):
    domain = comparable(["Cat", "##S", "Dog", "\u00e9l\u00e9phant", "the"], "wordpiece", set())
    # the uncased reference lower-cases and strips accents before WordPiece: Cat, ##S, Dog, the are found
    out = ref.compare(domain)
    assert out["shared"] == 4 and out["domain_in_reference"] == pytest.approx(4 / 5)
    cased = ReferenceForms(describe(wordpiece_from_vocab(REF, lowercase=False), "cased-ref", lowercase=False))
    assert cased.compare(domain)["shared"] == 1  # only "the"
