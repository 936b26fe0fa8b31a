"""The report tests' fixtures (the builders live in ``support.report``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.report import (
    BASE_MISSES,
    CONTINUED_MISSES,
    NER_TASK,
    write_corpus,
    write_ner_result,
    write_pretrain,
    write_vocab,
)


@pytest.fixture
def science_run(tmp_path: Path) -> Path:
    """A complete science run: corpus, vocab, two arms, three models x three seeds on the NER task."""
    root = tmp_path / "runs" / "science"
    write_corpus(root)
    write_vocab(root)
    write_pretrain(root, "continued", 30.0, 12.5)
    write_pretrain(root, "scratch", 9000.0, 140.0)
    for seed in (1, 2, 3):
        write_ner_result(root, "base", NER_TASK, seed, BASE_MISSES[seed])
        write_ner_result(root, "continued", NER_TASK, seed, CONTINUED_MISSES[seed])
        write_ner_result(root, "scratch", NER_TASK, seed, BASE_MISSES[seed])
    return root
