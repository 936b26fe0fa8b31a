"""The unigram bar an arm's perplexity is read against (``evaluation.unigram_bar``): exact values, and the
training split's counts from the stored token ids equal to the tokenizer's own reading of each text."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from domainbert.pretrain import evaluation
from domainbert.pretrain.data import pack_texts
from domainbert.pretrain.evaluation import unigram_bar, unigram_perplexity
from support.pretrain import wordpiece_tokenizer, write_corpus


def test_unigram_perplexity_exact_values():
    # add-one: probabilities 4/7, 2/7, 1/7; held-out tokens 0 and 1: exp(-(ln 4/7 + ln 2/7) / 2) = sqrt(49/8)
    assert unigram_perplexity(np.array([3, 1, 0]), np.array([0, 1])) == pytest.approx(math.sqrt(49 / 8), rel=1e-12)
    # nothing counted: every token as likely as any, the vocabulary's size
    assert unigram_perplexity(np.zeros(4, dtype=np.int64), np.array([2, 3])) == pytest.approx(4.0, rel=1e-12)


def test_the_bar_counts_the_training_split_as_the_tokenizer_reads_each_text(tmp_path, texts, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tokenizer = wordpiece_tokenizer(texts, vocab_size=400)
    corpus = write_corpus(tmp_path / "corpus", texts, n_val=20)
    domain = pack_texts(tokenizer, texts[:20], 32)
    counts: Counter[int] = Counter()  # studies/scripts/unigram_perplexity.py's reading: each training text, no special tokens
    for text in texts[20:]:
        counts.update(tokenizer(text, add_special_tokens=False)["input_ids"])
    reference = np.array([counts[i] for i in range(len(tokenizer))])
    expected = unigram_perplexity(reference, domain.input_ids[~domain.special].numpy())
    assert unigram_bar(tokenizer, corpus, domain) == pytest.approx(expected, rel=1e-9)
    monkeypatch.setattr(evaluation, "COUNT_CHUNK", 7)  # a long split is counted in pieces: the same figure
    assert unigram_bar(tokenizer, corpus, domain) == pytest.approx(expected, rel=1e-9)
    assert unigram_bar(tokenizer, corpus, None) is None
