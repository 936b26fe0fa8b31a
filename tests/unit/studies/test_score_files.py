"""Score files (studies.score_files): a committed study's runs recheck to the same figures."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest

from domainbert.core.errors import DataError
from domainbert.report.stats import compare_models
from studies.score_files import read_scores, write_scores

TAGS = ["O", "O", "B-X", "I-X", "B-Y"]


def ner_runs(model: str, keep: float, seeds: list[int], rng: random.Random, gold: list[list[str]]) -> list[dict]:
    runs = []
    for s in seeds:
        pred = [[t if rng.random() < keep else rng.choice(TAGS) for t in g] for g in gold]
        runs.append({"model": model, "task": "t", "task_type": "ner", "seed": s, "gold": gold, "pred": pred,
                     "primary_metric": "f1", "test": {"f1": 0.0}})
    return runs


def cls_runs(model: str, wrong: float, seeds: list[int], rng: random.Random, gold: list[str]) -> list[dict]:
    return [{"model": model, "task": "c", "task_type": "classification", "seed": s, "gold": gold,
             "pred": [g if rng.random() > wrong else rng.choice("abc") for g in gold], "primary_metric": "macro_f1",
             "test": {"macro_f1": 0.0}} for s in seeds]


def test_comparisons_from_a_score_file_equal_those_from_the_predictions(tmp_path: Path) -> None:
    rng = random.Random(0)
    gold = [[rng.choice(TAGS) for _ in range(rng.randint(2, 9))] for _ in range(150)]
    a, b = ner_runs("a", 0.9, [1, 2, 3], rng, gold), ner_runs("b", 0.8, [1, 2, 3], rng, gold)
    labels = [rng.choice("abc") for _ in range(120)]
    c, d = cls_runs("c", 0.2, [1, 2], rng, labels), cls_runs("d", 0.4, [1, 2], rng, labels)
    path = write_scores(a + b + c + d, tmp_path / "point.json.gz", {"budget": 1})
    about, runs = read_scores(path)
    assert about == {"budget": 1} and len(runs) == 10 and "pred" not in runs[0] and "gold" not in runs[0]
    for x, y in ((a, b), (c, d)):
        names = {x[0]["model"], y[0]["model"]}
        stored = [r for r in runs if r["model"] in names]
        from_file = compare_models([r for r in stored if r["model"] == x[0]["model"]],
                                   [r for r in stored if r["model"] == y[0]["model"]], n_samples=500)
        direct = compare_models(x, y, n_samples=500)
        for figures in (lambda c: (c.diff, c.low, c.high, c.p_value), lambda c: (c.design.se, c.design.df)):
            assert figures(from_file) == pytest.approx(figures(direct), abs=1e-12)
        assert np.array_equal(from_file.draws.example, direct.draws.example)


def test_a_damaged_score_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(DataError, match="bad.json.gz"):
        read_scores(bad)
    other = tmp_path / "other.json.gz"
    with gzip.open(other, "wt") as f:
        f.write('{"format": 99, "runs": []}')
    with pytest.raises(DataError, match="not a score file of format 1"):
        read_scores(other)
