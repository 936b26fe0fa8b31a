"""Vectorised word splitting and hashing against Python's own ``re`` and ``str.split``."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

from domainbert.corpus.words import WordBatch, lower_words, sequence_keys, space_words
from reference.words import words_of

ROOT = Path(__file__).resolve().parents[3]
TRICKY = ["", "   ", "a", " lead and trail ", "Héllo WORLD_x 3.14 café—naïve “quoted” 😀emoji\u2028next\xa0nb",
          "ＦＵＬＬ width", "Ελληνικά και Русский текст", "日本語のテキスト。次の文", "x\u2003y\u3000z\tw\nv",
          "tab\x1cfile\x1dgroup sep", "under_score and-dash", "²³ ½ ⅷ 4th", "MiXeD CaSe mixed case"]


def _shipped_texts(limit: int = 300) -> list[str]:
    texts = []
    for name in ("tweets/trump_tweets.jsonl.gz", "science/foldoc.jsonl.gz", "law/licenses.jsonl.gz"):
        with gzip.open(ROOT / "corpora" / name, "rt") as f:
            texts += [json.loads(line)["text"] for _, line in zip(range(limit // 3), f, strict=False)]
    return texts


def _check_hashes(texts: list[str], batch_words: np.ndarray, python_words: list[str]) -> None:
    """Equal words get equal hashes and different words different ones (no collision in the sample)."""
    assert len(batch_words) == len(python_words)
    by_word: dict[str, int] = {}
    for word, h in zip(python_words, batch_words.tolist(), strict=True):
        assert by_word.setdefault(word, h) == h, word
    assert len(set(by_word.values())) == len(by_word)


def test_lower_words_are_the_words_of_the_regex():
    texts = TRICKY + _shipped_texts()
    words = lower_words(texts)
    assert words.counts.tolist() == [len(words_of(t)) for t in texts]
    flat = [w for t in texts for w in words_of(t)]
    assert words.chars.tolist() == [len(w) for w in flat]
    _check_hashes(texts, words.hashes, flat)
    # case-insensitive, position-independent
    a, b = lower_words(["The CAT sat", "x y the cat"]).hashes.tolist(), lower_words(["cat"]).hashes.tolist()
    assert a[0] == a[5] and a[1] == a[6] == b[0]


def test_one_to_many_lowercasing_keeps_the_word_whole():
    """U+0130 lowercases to 'i' + a combining dot, which ``\\w`` does not match: the regex splits the word,
    the tables keep it (and hash it like 'istanbul')."""
    assert words_of("İstanbul") == ["i", "stanbul"]
    words = lower_words(["İstanbul", "istanbul"])
    assert words.counts.tolist() == [1, 1] and words.hashes[0] == words.hashes[1]


def test_space_words_are_str_split():
    texts = TRICKY + _shipped_texts()
    words = space_words(texts)
    assert words.counts.tolist() == [len(t.split()) for t in texts]
    flat = [w for t in texts for w in t.split()]
    assert words.chars.tolist() == [len(w) for w in flat]
    _check_hashes(texts, words.hashes, flat)
    lowered = space_words(texts, lowercase=True)
    _check_hashes(texts, lowered.hashes, [w.lower() for w in flat])


def test_sequence_keys_equal_iff_word_sequences_equal():
    rng = random.Random(0)
    vocab = ["alpha", "beta", "gamma", "Beta", "ALPHA"]
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 4))) for _ in range(300)]
    keys = sequence_keys(space_words(texts, lowercase=True)).tolist()
    normal = [" ".join(t.lower().split()) for t in texts]
    first: dict[str, int] = {}
    for n, k in zip(normal, keys, strict=True):
        assert first.setdefault(n, k) == k
    assert len(set(first.values())) == len(first)
    # word order matters
    a, b = sequence_keys(space_words(["a b", "b a"])).tolist()
    assert a != b


def test_take_and_concat_regroup_documents():
    texts = ["a b c", "", "d e", "f g h i", "j"]
    words = lower_words(texts)
    picked = [3, 0, 0, 1, 4]
    for got, ref in ((words.take(np.array(picked)), lower_words([texts[i] for i in picked])),
                     (WordBatch.concat([words.take(np.array([4])), lower_words(["x y"])]), lower_words(["j", "x y"]))):
        for field in ("hashes", "counts", "chars"):
            assert np.array_equal(getattr(got, field), getattr(ref, field))
