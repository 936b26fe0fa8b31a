"""Fixtures of the flow tests (helpers live in flowkit.py): a tiny base model and a tiny domain YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowkit import CORPORA, TINY_YAML, make_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model") / "bert-tiny")


@pytest.fixture
def tiny_domain(tmp_path: Path, tiny_model: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_YAML.format(corpora=CORPORA, base_model=tiny_model))
    return path
