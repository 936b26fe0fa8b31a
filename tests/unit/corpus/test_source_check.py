"""``corpus.source_check``: what the source files can hold, weighed before the corpus is built."""

from __future__ import annotations

import gzip
import json

from domainbert.config.domain import load_domain
from domainbert.corpus.source_check import source_words_at_most, vocab_size_problem


def test_a_vocabulary_is_weighed_against_the_most_words_the_files_hold(tmp_path):
    line = b'{"text": "word word"}\n'
    (tmp_path / "a.jsonl").write_bytes(line * 100)
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(line * 1000))  # gzip records the size it unpacks to
    sources = json.dumps(
        [{"type": "local", "name": "s", "paths": [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl.gz")]}]
    )
    cfg = load_domain("science", [f"corpus.sources={sources}", "tokenizer.vocab_size=null"])
    # every word but a file's last takes a character and a separator
    assert source_words_at_most(cfg.corpus.sources) == len(line) * 1100 // 2 + 2 == 12_102
    # no size set: the base model's tokenizer's (the package checkpoint's, BERT uncased's 30,522 tokens)
    assert vocab_size_problem(cfg, "d.yaml") == (
        "d.yaml: tokenizer.vocab_size: the corpus sources hold at most 12,102 words, and a 30,522-token domain "
        "vocabulary needs 61,044 train words (vocab.min_words_per_token 2 per token): set tokenizer.vocab_size to "
        "6,051 or less, or add text"
    )
    fits = load_domain("science", [f"corpus.sources={sources}", "tokenizer.vocab_size=6051"])
    assert vocab_size_problem(fits, "d.yaml") is None
    looser = load_domain("science", [f"corpus.sources={sources}", "vocab.min_words_per_token=0.3"])
    assert vocab_size_problem(looser, "d.yaml") is None  # 30,522 x 0.3 = 9,157 words
    # a Hub dataset's size is unknown here: nothing to weigh
    assert vocab_size_problem(load_domain("science", [], profile="full"), "d.yaml") is None
