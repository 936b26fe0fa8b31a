"""Cleaning and filter components: registry, option validation and each component's behaviour."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from langid.langid import LanguageIdentifier, model

from domainbert.config.corpus import FilterSpec
from domainbert.config.domain import load_domain
from domainbert.core.errors import ConfigError
from domainbert.corpus.filters import available, build_pipeline, create
from domainbert.corpus.langid_filter import _Model
from reference.gopher import gopher_filter
from reference.pipeline import apply_one, drop_counts

ROOT = Path(__file__).resolve().parents[3]


def comp(name, **options):
    return create(FilterSpec(name=name, options=options))


def test_registry_names_and_errors():
    names = available()
    for name in ["unicode_normalize_v1", "strip_control_chars_v1", "normalize_whitespace_v1", "min_length_v1",
                 "max_length_v1", "gopher_repetition_v1", "symbol_ratio_v1", "language_id_v1",
                 "tweet_normalize_v1", "strip_boilerplate_v1"]:
        assert name in names
    with pytest.raises(ConfigError, match="valid names: .*min_length_v1"):
        comp("min_length_v9")
    with pytest.raises(ConfigError) as err:
        build_pipeline([FilterSpec(name="min_length_v1", options={"min_wrds": 3})])
    assert "corpus.filters[0].options.min_wrds" in str(err.value)
    with pytest.raises(ConfigError, match="form"):
        comp("unicode_normalize_v1", form="NFX")


def test_transforms():
    assert comp("unicode_normalize_v1", form="NFKC").transform("\ufb01le \u2460") == "file 1"
    assert comp("strip_control_chars_v1").transform("a\x00b\u200bc\r\nd\te") == "abc\nd\te"
    ws = comp("normalize_whitespace_v1")
    assert ws.transform("  a \t b  \n\n\n\n c  ") == "a b\n\nc"
    assert comp("normalize_whitespace_v1", keep_newlines=False).transform("a\n\nb") == "a b"
    # the one-line fast path (str.split) and the line-by-line regexes agree on every kind of whitespace
    spaces = [" ", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x85", "\xa0", "\u2003", "\u2028", "\u3000", "\n"]
    rng = random.Random(1)
    for _ in range(300):
        text = "".join(rng.choice(spaces + ["ab", "c"]) for _ in range(rng.randint(0, 12)))
        reference = "\n".join(line.strip() for line in re.sub(r"[^\S\n]+", " ", text).split("\n"))
        assert ws.transform(text) == re.sub(r"\n\s*\n\s*", "\n\n", reference).strip(), repr(text)
    tweet = comp("tweet_normalize_v1")
    assert tweet.transform("@bob see https://t.co/x1 and www.a.com, mail me@x.org") == \
        "@user see http and http mail me@x.org"
    header = "# Copyright (c) 2020 Foo\n# SPDX-License-Identifier: MIT\n\nimport os\nprint(1)"
    assert comp("strip_boilerplate_v1").transform(header) == "import os\nprint(1)"


def test_length_and_symbol_filters():
    ml = comp("min_length_v1", min_words=3, min_chars=5)
    assert ml.filter("one two three") == (True, "")
    assert ml.filter("one two") == (False, "too_few_words")
    assert ml.filter("a b") == (False, "too_few_chars")
    mx = comp("max_length_v1", max_words=2)
    assert mx.filter("a b c") == (False, "too_many_words")
    sr = comp("symbol_ratio_v1", max_ratio=0.2)
    assert sr.filter("#a #b #c words") == (False, "symbol_ratio")
    assert sr.filter("#a and some more plain words here") == (True, "")


def test_gopher_repetition():
    gopher = comp("gopher_repetition_v1")
    prose = ("The compiler translates source code into machine code. A linker then combines object files "
             "into an executable, resolving symbols between them and laying out sections in memory.")
    assert gopher.filter(prose) == (True, "")
    assert gopher.filter("buy now\n" * 10) == (False, "dup_line_frac")
    assert gopher.filter(" ".join(["spam eggs"] * 30)) == (False, "top_2_gram")
    repeated = prose + " " + " ".join(f"w{i}" for i in range(40)) + " " + prose
    assert gopher.filter(repeated)[1].startswith("duplicated_")
    # a short definition repeating its subject is not spam; n-gram rules start at 50 words
    assert gopher.filter("0/1 knapsack problem\n\nThe knapsack problem restricted to zero or one.") == (True, "")
    assert comp("gopher_repetition_v1", ngram_min_words=0).filter("knapsack problem and knapsack problem")[0] is False
    # batches in which no document has a 4-gram (the top n-gram rules find no position to index)
    short = comp("gopher_repetition_v1", ngram_min_words=0)
    assert short.filter_batch(["one"]) == [(True, "")] and short.filter_batch(["a", "b c"]) == [(True, "")] * 2


def test_language_id_filters():
    lid = comp("language_id_v1", languages=["en"], min_confidence=0.5)
    assert lid.filter("The court held that the licence was void.") == (True, "")
    assert lid.filter("Der Vertrag ist nichtig und ungültig, sagte das Gericht.") == (False, "language_de")
    assert comp("language_id_v1", languages=["en"], min_confidence=1.0).filter("The court held.") == \
        (False, "low_confidence")


def test_language_id_batch_matches_langid_on_shipped_text():
    """The vectorised DFA (documents of different byte lengths, multi-byte characters, an empty text, several
    chunks) gives langid's own prediction and probability for every document of a sample of each shipped
    corpus, cut as the filter cuts them, and the filter's verdicts follow from them."""
    ident = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    lid = comp("language_id_v1", languages=["en"], min_confidence=0.5)
    texts = ["", "Ça coûte 5 € – très cher!", "東京は日本の首都です。", "Москва — столица России."]
    for path in sorted((ROOT / "corpora").glob("*/*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            texts += [json.loads(line)["text"] for _, line in zip(range(30), f, strict=False)]
    heads = [t[: lid.options.max_chars] for t in texts]
    m = _Model.get()
    m.CHUNK = 16  # several chunks (an instance attribute over the class default)
    try:
        got = m.classify_batch(heads)
        verdicts = lid.filter_batch(texts)
    finally:
        del m.CHUNK
    reference = [ident.classify(h) for h in heads]
    for head, (lang, prob), (ref_lang, ref_prob) in zip(heads, got, reference, strict=True):
        assert lang == ref_lang and prob == pytest.approx(ref_prob, abs=1e-9), head
    assert verdicts == [(True, "") if lang == "en" and prob >= 0.5 else
                        (False, f"language_{lang}") if lang != "en" else (False, "low_confidence")
                        for lang, prob in reference]
    assert len({lang for lang, _ in reference}) >= 4 and sum(not keep for keep, _ in verdicts) >= 3


def test_language_id_tables_are_checked_against_langid_and_cached_by_model(monkeypatch, tmp_path):
    """Tables that do not reproduce langid's ``classify`` (a langid release that stores its model otherwise)
    are refused and never cached; good ones are cached under a name taken from the model string."""
    from domainbert.corpus import langid_filter

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with monkeypatch.context() as patched:
        patched.setattr(LanguageIdentifier, "classify", lambda self, text: ("xx", 1.0))
        with pytest.raises(RuntimeError, match="do not reproduce langid's classify"):
            langid_filter._load_tables()
    assert not list(tmp_path.rglob("*.npz"))
    tables = langid_filter._load_tables()
    assert [p.name for p in tmp_path.rglob("*.npz")] == [langid_filter._cache_path(model).name]
    assert langid_filter._cache_path(model) != langid_filter._cache_path(model + b"\n")
    cached = langid_filter._load_tables()
    assert cached.keys() == tables.keys() and all(np.array_equal(cached[k], tables[k]) for k in tables)


def test_pipeline_counts_drops_by_reason():
    pipe = build_pipeline([FilterSpec(name="normalize_whitespace_v1"),
                           FilterSpec(name="min_length_v1", options={"min_words": 2})])
    texts, reasons = pipe.apply_batch(["  hello   world ", "one", "   ", "two words"])
    assert list(zip(texts, reasons, strict=True)) == [
        ("hello world", None), (None, "min_length_v1:too_few_words"),
        (None, "normalize_whitespace_v1:empty_after_transform"), ("two words", None)]
    assert pipe.dropped == {"normalize_whitespace_v1": {"empty_after_transform": 1},
                            "min_length_v1": {"too_few_words": 1}}


def test_pipeline_batch_equals_one_document_at_a_time():
    """The law domain's filter stack over shipped documents and documents made to fail each component: every
    result and every drop count equals the components run on one document at a time, in YAML order."""
    pipe = build_pipeline(load_domain("law").corpus.filters)
    assert {c.kind for c in pipe.components} == {"transform", "filter"}
    texts = []
    for name in ("law/licenses.jsonl.gz", "tweets/trump_tweets.jsonl.gz", "science/foldoc.jsonl.gz"):
        with gzip.open(ROOT / "corpora" / name, "rt") as f:
            texts += [json.loads(line)["text"] for _, line in zip(range(60), f, strict=False)]
    texts += ["", " \t ", "\x00\u200b", "one", "buy now\n" * 10, " ".join(["spam eggs"] * 30), "#" * 40 + " a b c",
              "Der Vertrag ist nichtig und ungültig, sagte das Gericht gestern in Berlin."]
    expected = [apply_one(pipe.components, t) for t in texts]
    got = pipe.apply_batch(texts)
    assert list(zip(*got, strict=True)) == expected
    assert pipe.dropped == drop_counts(pipe.components, [r for _, r in expected])
    assert len({r.split(":")[0] for _, r in expected if r}) >= 3  # several components really dropped some


@pytest.mark.parametrize("options", [{"ngram_min_words": 50}, {"ngram_min_words": 0},
                                     {"ngram_min_words": 0, "top_n_grams": {4: 0.05, 2: 0.3},
                                      "dup_n_grams": {3: 0.05, 7: 0.05}}])
def test_gopher_batch_agrees_with_one_at_a_time(options):
    """The vectorised n-gram rules give every document the verdict and reason of the per-document rules,
    on shipped prose (mostly kept) mixed with documents made to trip each rule; also with rule lengths that
    do not grow in rule order (top 2, 4 then duplicate 3, 7)."""
    gopher = comp("gopher_repetition_v1", **options)
    texts = []
    for name in ("science/foldoc.jsonl.gz", "law/licenses.jsonl.gz"):
        with gzip.open(ROOT / "corpora" / name, "rt") as f:
            texts += [json.loads(line)["text"] for _, line in zip(range(150), f, strict=False)]
    prose = texts[3]
    texts += [" ".join(["spam eggs"] * 30), prose + " " + prose, "a b c d " * 20, "knapsack problem and knapsack",
              " ".join(f"w{i % 7}" for i in range(90)), prose + " tail " + " ".join(prose.split()[:12]), "one", ""]
    expected = [gopher_filter(gopher, t) for t in texts]
    assert gopher.filter_batch(texts) == expected
    assert [gopher.filter(t) for t in texts[-8:]] == expected[-8:]
    reasons = {r for keep, r in expected if not keep}
    assert len(reasons) >= 2  # the mix really exercises several rules
