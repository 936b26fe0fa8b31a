"""Held-out figures on hand-counted text."""

from __future__ import annotations

import pytest

from domainbert.vocab.fertility import count_words, heldout_stats, token_counts, token_counts_from_words
from domainbert.vocab.reference_vocabs import describe, wordpiece_from_vocab

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "run", "##ning", "##s", "cat", "."]


def test_heldout_figures_match_hand_count():
    info = describe(wordpiece_from_vocab(VOCAB, lowercase=True), "tiny")
    out = heldout_stats(info, ["The running cats.", "the dog"])
    # words: the | running | cats | . || the | dog  -> 6 words
    # tokens: the | run ##ning | cat ##s | . || the | [UNK] -> 8 tokens
    assert out["words"] == 6 and out["tokens"] == 8
    assert out["fertility"] == pytest.approx(8 / 6)
    assert out["split_2plus"] == pytest.approx(2 / 6)
    assert out["split_3plus"] == 0.0
    assert out["unk_rate"] == pytest.approx(1 / 8)
    assert out["unk_word_rate"] == pytest.approx(1 / 6)
    assert out["mean_tokens_per_document"] == pytest.approx(4.0)


def test_word_and_token_counts():
    texts = ["The running cats.", "the cat_s run"]
    words = count_words(texts)
    assert words == {"The": 1, "running": 1, "cats": 1, ".": 1, "the": 1, "cat": 1, "_": 1, "s": 1, "run": 1}
    tok = wordpiece_from_vocab(VOCAB, lowercase=True)
    direct = token_counts(tok, ["the running cats", "the cats"])
    from_words = token_counts_from_words(tok, count_words(["the running cats", "the cats"]))
    assert direct.tolist() == from_words.tolist()
    assert direct[tok.token_to_id("##s")] == 2 and direct[tok.token_to_id("the")] == 2
