"""Fixtures of the flow tests (helpers live in flowkit.py): a tiny base model, a tiny domain YAML and a
SQLite-backed Prefect server per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flowkit import CORPORA, TINY_YAML, make_tiny_model, prefect_server


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model") / "bert-tiny")


@pytest.fixture
def tiny_domain(tmp_path: Path, tiny_model: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_YAML.format(corpora=CORPORA, base_model=tiny_model))
    return path


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``prefect server start`` on SQLite: (API URL, PREFECT_HOME)."""
    home = tmp_path_factory.mktemp("prefect-sqlite")
    with prefect_server(home, None, home / "server.log") as url:
        yield url, home
