"""Fixtures of the vocab tests: a synthetic domain corpus, a general control text, a 2-layer base model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vocab_fixtures import make_texts, write_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus", make_texts(300, 1), make_texts(20, 2))


@pytest.fixture
def control_file(tmp_path: Path) -> Path:
    path = tmp_path / "general.jsonl"
    with path.open("w") as f:
        for i, text in enumerate(make_texts(600, 3, domain_share=0.0)):
            f.write(json.dumps({"id": str(i), "text": text}) + "\n")
    return path


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A 2-layer, hidden-128 BertForMaskedLM with an uncased WordPiece vocab trained on general text."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from domainbert.vocab.train import to_transformers, train_tokenizer

    folder = tmp_path_factory.mktemp("tiny-base")
    tok = train_tokenizer(make_texts(400, 7, domain_share=0.0) + ["micro processor immuno histo chemistry"] * 3,
                          "wordpiece", 200, lowercase=True, min_frequency=1)
    hf = to_transformers(tok, "wordpiece", 128)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128, pad_token_id=0)
    BertForMaskedLM(config).save_pretrained(str(folder))
    hf.save_pretrained(str(folder))
    (folder / "vocab.txt").write_text("\n".join(t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]))
                                      + "\n")
    return folder
