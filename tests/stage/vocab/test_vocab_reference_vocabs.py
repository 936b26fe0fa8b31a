"""Reference vocabularies: the shipped BERT and GPT-2 files load; malformed files and casing mistakes are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbert.config.vocab import ReferenceVocab
from domainbert.core.errors import DataError, ModelError
from domainbert.core.paths import project_root
from domainbert.vocab.reference_vocabs import load_base_tokenizer, load_reference, read_wordpiece_vocab

VOCAB = project_root() / "corpora" / "vocab"


def test_shipped_bert_vocabs_infer_their_casing():
    uncased = load_reference(ReferenceVocab(name="u", path=str(VOCAB / "bert-base-uncased-vocab.txt")))
    cased = load_reference(ReferenceVocab(name="c", path=str(VOCAB / "bert-base-cased-vocab.txt")))
    assert uncased.lowercase is True and cased.lowercase is False
    assert uncased.tokenizer.encode("Tokenization").tokens == ["token", "##ization"]
    assert cased.tokenizer.encode("Hello").tokens == ["Hello"]
    assert uncased.unk_id == 100 and uncased.tokenizer.get_vocab_size() == 30522


def test_gpt2_bytelevel_reference():
    info = load_reference(ReferenceVocab(name="gpt2", path=str(VOCAB / "gpt2-vocab.json")))
    assert info.style == "bytelevel" and info.lowercase is False
    assert info.tokenizer.encode("hello world").tokens == ["\u0120hello", "\u0120world"]


def test_cased_vocab_with_lowercasing_is_refused():
    ref = ReferenceVocab(name="c", path=str(VOCAB / "bert-base-cased-vocab.txt"), lowercase=True)
    with pytest.raises(DataError, match="cased but the tokenizer lower-cases"):
        load_reference(ref, field_name="vocab.references[0]")


def test_uncased_vocab_without_lowercasing_is_refused():
    ref = ReferenceVocab(name="u", path=str(VOCAB / "bert-base-uncased-vocab.txt"), lowercase=False)
    with pytest.raises(DataError, match="uncased"):
        load_reference(ref)


def _vocab_file(tmp_path: Path, tokens: list[str]) -> Path:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    return path


@pytest.mark.parametrize("bad, line, message", [
    (lambda t: t[:50] + ["the"] + t[50:], 157, "repeats line 51"),
    (lambda t: t[:7] + [""] + t[7:], 8, "empty or holds whitespace"),
    (lambda t: t[:9] + ["two words"] + t[9:], 10, "empty or holds whitespace"),
])
def test_malformed_vocab_names_the_line(tmp_path, bad, line, message):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(150)] + ["the"]
    path = _vocab_file(tmp_path, bad(tokens))
    with pytest.raises(DataError, match=message) as err:
        read_wordpiece_vocab(path)
    assert err.value.line == line and err.value.file == str(path)


def test_vocab_without_unk_or_too_short(tmp_path):
    with pytest.raises(DataError, match=r"no \[UNK\]"):
        read_wordpiece_vocab(_vocab_file(tmp_path, [f"w{i}" for i in range(200)]))
    with pytest.raises(DataError, match="at least"):
        read_wordpiece_vocab(_vocab_file(tmp_path, ["[UNK]", "a", "b"]))


def test_malformed_merges(tmp_path):
    merges = tmp_path / "bad-merges.txt"
    merges.write_text("#version: 0.2\n\u0120 t\nnot-a-pair\n")
    ref = ReferenceVocab(name="g", path=str(VOCAB / "gpt2-vocab.json"), merges=str(merges))
    with pytest.raises(DataError, match="malformed merges") as err:
        load_reference(ref)
    assert err.value.line == 3


def test_base_tokenizer_casing_must_match_config(tiny_base):
    _, info = load_base_tokenizer(str(tiny_base), lowercase=True)
    assert info.lowercase is True
    with pytest.raises(ModelError, match="base_model.lowercase"):
        load_base_tokenizer(str(tiny_base), lowercase=False)
