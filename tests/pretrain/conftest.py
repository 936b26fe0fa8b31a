"""Fixtures of the pretraining tests (builders in pretrain_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pretrain_fixtures import foldoc_texts, tiny_bert, wordpiece_tokenizer, write_corpus

from domainbert.core.paths import RunLayout


@pytest.fixture(scope="session")
def texts() -> list[str]:
    return foldoc_texts(300)


@pytest.fixture(scope="session")
def base_model(tmp_path_factory, texts) -> Path:
    return tiny_bert(wordpiece_tokenizer(texts), tmp_path_factory.mktemp("base") / "model")


@pytest.fixture(scope="session")
def headless_base(tmp_path_factory, texts) -> Path:
    """A tiny BERT saved as a bare ``BertModel`` (pooler, no MLM head), like the offline MiniLM package."""
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = wordpiece_tokenizer(texts)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id)
    folder = tmp_path_factory.mktemp("headless") / "model"
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def layout(tmp_path, texts) -> RunLayout:
    lay = RunLayout(tmp_path / "run")
    write_corpus(lay.corpus, texts)
    return lay
