"""Fixtures for fine-tuning tests: a tiny random BERT (2 layers, hidden 128) with a WordPiece vocab we write."""

from __future__ import annotations

from pathlib import Path

import pytest

WORDS = ("the a of and to is in for on with data program language compiler memory network file system unix "
         "lisp code computer process protocol server user term function object type list string").split()
PIECES = ["##s", "##ed", "##ing", "##er", "##ly", "##x", "##y", "##z"]


def write_vocab(path: Path) -> Path:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?()-\"'")
    vocab = specials + WORDS + PIECES + chars + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    path.write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    return path


def build_tiny_bert(folder: Path, *, tokenizer: bool = True) -> Path:
    """Save a random-init 2-layer hidden-128 BERT (and its tokenizer) to ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = write_vocab(folder.parent / f"{folder.name}-vocab.txt")
    vocab = {w: i for i, w in enumerate(vocab_file.read_text().split("\n")) if w}
    # Built from a tokenizers object: BertTokenizerFast(vocab_file=...) silently gives all-[UNK] here.
    tk = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok = BertTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]", do_lower_case=True)
    config = BertConfig(vocab_size=len(tok), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    if tokenizer:
        tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")
