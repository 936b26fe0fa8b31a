"""``language_id_v2``: the length-aware decision keeps short English texts that v1 drops, still drops short
non-English texts, and is v1 on texts with enough evidence."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from domainbert.config.corpus import FilterSpec
from domainbert.corpus import filters
from domainbert.corpus.langid_filter import _Model

ROOT = Path(__file__).resolve().parents[3]

# Real short English texts (WordNet glosses, Guardian headlines, tweets) that language_id_v1 drops.
SHORT_ENGLISH = [
    "race on skates", "a lesson in dancing", "a sudden desire", "chorea in dogs",
    "form into a solid mass; coalesce", "German poet (1724-1803)", "Jack Welch obituary",
    "British Gas owner suffers £1.1bn loss", "@user Thank you so much Adam!",
    "Offshore wind energy investment quadruples despite Covid-19 slump",
]
# Tweets whose flag emoji (4-byte UTF-8) alone made langid's byte n-grams say Chinese or Russian.
EMOJI_ENGLISH = ["Thank you Andrew Jackson! #POTUS7 #USA\U0001F1FA\U0001F1F8 http",
                 "#NYCStrong #USA\U0001F1FA\U0001F1F8 http"]
# Ordinary short sentences in other languages, written for this test.
SHORT_OTHER = [
    "Der Vertrag ist nichtig.", "Je ne sais pas pourquoi.", "¿Dónde está la biblioteca?",
    "Ik heb vandaag geen tijd.", "Non ho capito la domanda.", "Jag förstår inte frågan.",
    "Das Wetter ist heute schön.", "Nie mam dzisiaj czasu.", "Eu não falo inglês muito bem.",
    "Minä en ymmärrä kysymystä.", "Ich habe keine Zeit.", "La casa es muy grande.", "Hoe laat is het?",
    "Bugün hava çok güzel.", "Nem értem a kérdést.",
]


def comp(name: str, **options):
    return filters.create(FilterSpec(name=name, options=options))


def test_short_english_kept_by_v2_and_dropped_by_v1():
    v1 = comp("language_id_v1", languages=["en"], min_confidence=0.5)
    v2 = comp("language_id_v2", languages=["en"], min_confidence=0.5)
    assert not any(keep for keep, _ in v1.filter_batch(SHORT_ENGLISH))  # the texts the issue is about
    assert v2.filter_batch(SHORT_ENGLISH) == [(True, "")] * len(SHORT_ENGLISH)


def test_emoji_are_not_language_evidence():
    v1 = comp("language_id_v1", languages=["en"])
    v2 = comp("language_id_v2", languages=["en"])
    assert not any(keep for keep, _ in v1.filter_batch(EMOJI_ENGLISH))
    assert v2.filter_batch(EMOJI_ENGLISH) == [(True, "")] * len(EMOJI_ENGLISH)
    assert v2.filter("Das Wetter ist heute sch\u00f6n \u2600\ufe0f") == (False, "language_de")


def test_short_non_english_still_dropped():
    v2 = comp("language_id_v2", languages=["en"])
    verdicts = v2.filter_batch(SHORT_OTHER)
    assert [keep for keep, _ in verdicts] == [False] * len(SHORT_OTHER)
    assert all(reason.startswith("language_") and reason != "language_en" for _, reason in verdicts)
    assert v2.filter("Der Vertrag ist nichtig.") == (False, "language_de")


def test_allowance_shrinks_with_evidence():
    """With no allowance v2 is v1; a text past ``full_evidence_features`` gets v1's verdict whatever the margin."""
    texts = SHORT_ENGLISH + SHORT_OTHER
    v1 = comp("language_id_v1", languages=["en"], min_confidence=0.5)
    strict = comp("language_id_v2", languages=["en"], min_confidence=0.5, short_margin=0)
    assert strict.filter_batch(texts) == v1.filter_batch(texts)
    _, features = _Model.get().scores_batch(SHORT_ENGLISH)
    tight = comp("language_id_v2", languages=["en"], short_margin=50, full_evidence_features=int(features.min()))
    assert tight.filter_batch(SHORT_ENGLISH) == v1.filter_batch(SHORT_ENGLISH)


def test_v2_is_v1_on_long_shipped_text():
    """Past ``full_evidence_features`` features (most licence texts and FOLDOC entries) the verdicts are v1's."""
    texts = []
    for name in ("law/licenses.jsonl.gz", "science/foldoc.jsonl.gz"):
        with gzip.open(ROOT / "corpora" / name, "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for _, line in zip(range(300), f, strict=False)]
    v2 = comp("language_id_v2", languages=["en"], min_confidence=0.9)
    _, features = _Model.get().scores_batch([t[:600] for t in texts])
    long = [t for t, n in zip(texts, features, strict=True) if n >= v2.options.full_evidence_features]
    assert len(long) > 400
    v1 = comp("language_id_v1", languages=["en"], min_confidence=0.9)
    assert v2.filter_batch(long) == v1.filter_batch(long)


def test_scores_agree_with_classify():
    texts = SHORT_ENGLISH + SHORT_OTHER + [""]
    logp, features = _Model.get().scores_batch(texts)
    assert logp.shape == (len(texts), len(_Model.get().classes)) and features[-1] == 0
    for (lang, _), row in zip(_Model.get().classify_batch(texts), logp, strict=True):
        assert _Model.get().classes[int(row.argmax())] == lang


def test_options_are_validated():
    from domainbert.core.errors import ConfigError

    with pytest.raises(ConfigError, match="short_margin"):
        filters.create(FilterSpec(name="language_id_v2", options={"languages": ["en"], "short_margin": -1}))
