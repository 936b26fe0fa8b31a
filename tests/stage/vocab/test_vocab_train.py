"""Training and saving domain tokenizers: BERT-compatible WordPiece and a cased SentencePiece unigram."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer, DataCollatorForLanguageModeling

from domainbert.config.vocab import TokenizerConfig
from domainbert.core.errors import DataError
from domainbert.vocab.train import (
    check_trained_size,
    ordered_vocab,
    save_tokenizer,
    train_tokenizer,
    truncate_wordpiece,
)
from support.vocab import make_texts

FIXED = ["low lower lowest"] * 5 + ["newer newest wider"] * 5


def test_wordpiece_on_fixed_text_has_bert_specials_and_whole_words():
    tok = train_tokenizer(FIXED, "wordpiece", 100, lowercase=True, min_frequency=1)
    assert ordered_vocab(tok)[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # every word of the fixed text was merged into one token; lower-casing applies before WordPiece
    assert tok.encode("Lowest NEWER wider", add_special_tokens=False).tokens == ["lowest", "newer", "wider"]
    assert tok.encode("lowest").tokens == ["[CLS]", "lowest", "[SEP]"]
    assert tok.encode("low", "wider").type_ids == [0, 0, 0, 1, 1]


def test_cased_wordpiece_keeps_case():
    tok = train_tokenizer(FIXED, "wordpiece", 100, lowercase=False, min_frequency=1)
    assert tok.encode("lowest Lowest", add_special_tokens=False).tokens == ["lowest", "[UNK]"]


def test_truncated_wordpiece_holds_only_the_first_ids():
    tok = train_tokenizer(make_texts(100, 0), "wordpiece", 300, lowercase=True)
    small = truncate_wordpiece(tok, 120)
    assert ordered_vocab(small) == ordered_vocab(tok)[:120]
    assert max(small.encode("microprocessor compiler kernel").ids) < 120


def test_too_little_text_for_the_vocab_size():
    tok = train_tokenizer(FIXED, "wordpiece", 5000, lowercase=True, min_frequency=1)
    with pytest.raises(DataError, match="too little text"):
        check_trained_size(tok, 5000, "domain tokenizer")
    with pytest.raises(DataError, match="empty"):
        train_tokenizer([], "wordpiece", 100, lowercase=True)


def test_wordpiece_folder_loads_with_autotokenizer(tmp_path):
    cfg = TokenizerConfig(kind="wordpiece", vocab_size=200, lowercase=True, min_frequency=1)
    save_tokenizer(train_tokenizer(make_texts(100, 0), "wordpiece", 200, True, 1), cfg, tmp_path / "tok")
    hf = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    enc = hf("Compiler kernel", "the kernel")
    assert (hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id, hf.mask_token_id) == (0, 1, 2, 3, 4)
    assert enc["input_ids"][0] == 2 and enc["input_ids"][-1] == 3
    assert enc["token_type_ids"][-1] == 1
    assert hf.model_max_length == 512


@pytest.mark.parametrize("lowercase", [True, False])
def test_wordpiece_folder_names_a_class_transformers_4_knows_and_ships_a_consistent_vocab_txt(tmp_path, lowercase):
    import json

    from transformers import BertTokenizerFast

    texts = make_texts(150, 0) + ["Naïve Café uses the MICRO-processor's cache."] * 3
    tok = train_tokenizer(texts, "wordpiece", 250, lowercase, 1)
    save_tokenizer(tok, TokenizerConfig(kind="wordpiece", vocab_size=250, lowercase=lowercase), tmp_path / "tok")
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizerFast" and config["do_lower_case"] is lowercase
    lines = (tmp_path / "tok" / "vocab.txt").read_text().splitlines()
    assert lines == [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    # BERT's tokenizer built from vocab.txt alone (what transformers 4.x's slow path reads) encodes as ours does
    from_vocab = BertTokenizerFast(vocab={t: i for i, t in enumerate(lines)}, do_lower_case=lowercase)
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    for text in ["Naïve Café uses the MICRO-processor's cache.", texts[0]]:
        assert from_vocab(text)["input_ids"] == loaded(text)["input_ids"] == tok.encode(text).ids


@pytest.mark.parametrize("kind", ["sentencepiece_unigram", "sentencepiece_bpe"])
def test_cased_sentencepiece_folder_is_usable_by_bert_mlm(tmp_path, kind):
    texts = [t.replace("the", "The") for t in make_texts(200, 4)]
    cfg = TokenizerConfig(kind=kind, vocab_size=150, lowercase=False)
    save_tokenizer(train_tokenizer(texts, kind, 150, lowercase=False), cfg, tmp_path / "tok")
    hf = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert (hf.cls_token, hf.sep_token, hf.mask_token, hf.pad_token, hf.unk_token) == (
        "<s>", "</s>", "<mask>", "<pad>", "<unk>")
    assert hf.pad_token_id == 0
    import json

    assert json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())["tokenizer_class"] == \
        "PreTrainedTokenizerFast"  # a class transformers 4.x and 5.x both load from tokenizer.json
    enc = hf(["The microprocessor kernel"], return_offsets_mapping=True)
    ids = enc["input_ids"][0]
    assert ids[0] == hf.cls_token_id and ids[-1] == hf.sep_token_id
    word_ids = enc.word_ids(0)
    assert word_ids[0] is None and word_ids[-1] is None
    assert sorted(set(w for w in word_ids if w is not None)) == [0, 1, 2]  # three words, whole-word maskable
    assert "The" in hf.decode(ids, skip_special_tokens=True)  # case kept
    start, end = enc["offset_mapping"][0][1]
    assert "The microprocessor kernel"[start:end].strip() in ("The", "T", "Th")
    batch = DataCollatorForLanguageModeling(hf, mlm_probability=0.5)([{"input_ids": ids}])
    assert batch["input_ids"].shape == batch["labels"].shape


def _trainers_own_pieces(texts: list[str], lowercase: bool) -> set[str]:
    """The ``##`` pieces the WordPiece trainer itself creates (the reference: a training pass with no merge)."""
    from tokenizers import trainers

    from domainbert.vocab.train import empty_tokenizer

    tok = empty_tokenizer("wordpiece", lowercase)
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=1, special_tokens=[], show_progress=False))
    return {t for t in tok.get_vocab() if t.startswith("##") and len(t) == 3}


@pytest.mark.parametrize("lowercase", [True, False])
def test_the_seeded_pieces_cover_every_piece_the_trainer_makes_and_little_else(lowercase):
    import gzip
    import json
    from pathlib import Path

    from domainbert.vocab.train import continuing_pieces

    source = Path(__file__).resolve().parents[3] / "corpora" / "tweets" / "trump_tweets.jsonl.gz"
    texts = [json.loads(line)["text"] for line in gzip.open(source, "rt", encoding="utf-8")][:3000]
    texts.append("naïve café 東京 the end")  # accents and CJK characters
    own, seeded = _trainers_own_pieces(texts, lowercase), set(continuing_pieces(texts, lowercase))
    assert own <= seeded
    assert len(seeded - own) <= 0.25 * len(own), sorted(seeded - own)
    assert "##東" not in seeded and "##," not in seeded and "##-" not in seeded
    assert ("##ï" in seeded) is (not lowercase) and "##i" in seeded
