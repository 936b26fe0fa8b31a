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


@pytest.fixture
def layout(tmp_path, texts) -> RunLayout:
    lay = RunLayout(tmp_path / "run")
    write_corpus(lay.corpus, texts)
    return lay
