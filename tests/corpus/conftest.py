"""Shared helpers of the corpus tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from domainbert.config.corpus import CorpusConfig
from domainbert.config.domain import load_domain


@pytest.fixture
def small_domain(tmp_path):
    """``make(docs, tasks, **decontamination)``: the science domain with ``docs`` as its only source (no filters,
    no near dedup, one worker) and ``tasks`` as its fine-tuning tasks."""

    def make(docs: list[str], tasks: list, **decon):
        path = Path(tmp_path) / "docs.jsonl.gz"
        with gzip.open(path, "wt") as f:
            f.writelines(json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(docs))
        base = load_domain("science")
        corpus = CorpusConfig.model_validate({
            "sources": [{"type": "local", "name": "docs", "paths": [str(path)]}],
            "filters": [], "dedup": {"near": False}, "decontamination": {"ngram": 8, **decon},
            "validation_fraction": 0.1, "workers": 1})
        return base.model_copy(update={"corpus": corpus,
                                       "finetune": base.finetune.model_copy(update={"tasks": tasks})})

    return make
