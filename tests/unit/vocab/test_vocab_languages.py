"""Per-language figures of a multilingual corpus (``meta.lang``): documents per language and each tokenizer's
fit on each language's held-out text, against counts worked by hand and BERT's real vocabulary."""

from __future__ import annotations

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from domainbert.core.paths import project_root
from domainbert.corpus.store import write_shard
from domainbert.vocab.fertility import heldout_stats
from domainbert.vocab.languages import by_language
from domainbert.vocab.reference_vocabs import describe

EN = ["the network protocol carries packets", "a compiler reads the program"]
RU = ["сеть передаёт пакеты данных", "компилятор читает программу"]


def _bert() -> Tokenizer:
    vocab = project_root() / "corpora/vocab/bert-base-uncased-vocab.txt"
    tok = Tokenizer(models.WordPiece.from_file(str(vocab), unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def _write(folder, split, rows):
    write_shard(folder / split / "shard-00000.parquet",
                [{"id": f"{split}-{i}", "text": t, "source": "s", "meta": {"lang": lang} if lang else None}
                 for i, (t, lang) in enumerate(rows)])


def test_documents_per_language_and_each_languages_fit(tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "train", [(t, "en") for t in EN * 3] + [(t, "ru") for t in RU] + [("no tag here", None)])
    _write(corpus, "validation", [(EN[0], "en"), (RU[0], "ru"), (RU[1], "ru")])
    bert = describe(_bert(), "bert-base-uncased")
    figures = by_language(corpus, heldout_documents=1, infos=[bert])
    assert figures["train_documents"] == {"en": 6, "ru": 2}  # most first; the untagged document is in neither
    assert figures["heldout_documents"] == {"en": 1, "ru": 1}  # at most heldout_documents per language
    assert figures["heldout"]["en"]["bert-base-uncased"] == heldout_stats(bert, [EN[0]])
    assert figures["heldout"]["ru"]["bert-base-uncased"] == heldout_stats(bert, [RU[0]])
    # BERT's English vocabulary cuts Russian far finer than English
    assert figures["heldout"]["ru"]["bert-base-uncased"]["fertility"] > 2 * figures["heldout"]["en"][
        "bert-base-uncased"]["fertility"]


def test_a_corpus_without_languages_has_no_language_figures(tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "train", [(t, None) for t in EN])
    _write(corpus, "validation", [(EN[0], None)])
    assert by_language(corpus, 10, [describe(_bert(), "bert")]) is None
