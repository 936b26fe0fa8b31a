"""The shipped manpages-fr-order and manpages-es-order tasks are what corpora/build_manpages_order.py makes from
their section tasks, and their swapped phrases hold exactly their originals' words (so a bag of words cannot tell
the two labels apart)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

LANGUAGES = ["fr", "es"]
ROOT = Path(__file__).resolve().parents[3] / "corpora"


def _builder():
    spec = importlib.util.spec_from_file_location("build_manpages_order", ROOT / "build_manpages_order.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("code", LANGUAGES)
def test_rebuilding_writes_the_shipped_bytes(code, tmp_path, monkeypatch) -> None:
    builder = _builder()
    monkeypatch.setattr(builder, "ROOT", tmp_path)
    builder.main(builder.LANGUAGES[code], tmp_path / "tasks" / f"manpages-{code}-order")
    for split in ("train", "validation", "test"):
        built = (tmp_path / "tasks" / f"manpages-{code}-order" / f"{split}.jsonl.gz").read_bytes()
        shipped = (ROOT / "tasks" / f"manpages-{code}-order" / f"{split}.jsonl.gz").read_bytes()
        assert hashlib.sha256(built).hexdigest() == hashlib.sha256(shipped).hexdigest(), split


def test_a_swap_exchanges_two_neighbouring_words_of_letters_and_nothing_else() -> None:
    builder = _builder()
    row = {"id": "p#0", "meta": {"page": "p.1", "notice": ""}}
    words = "le fichier 42 contient l'heure de fin des processus".split()
    assert builder.swappable(words) == [0, 5, 6, 7]  # never a digit or an apostrophe
    made = [builder.example(f"p#0:0:{k}", words, row) for k in range(40)]
    swapped = [m for m in made if m["label"] == "swapped"]
    assert 0 < len(swapped) < 40  # drawn per id
    for m in made:
        out = m["text"].split()
        assert Counter(out) == Counter(words)
        diff = [i for i, (a, b) in enumerate(zip(out, words, strict=True)) if a != b]
        if m["label"] == "original":
            assert diff == [] and m["meta"]["swapped_at"] is None
        else:
            at = m["meta"]["swapped_at"]
            assert diff == [at, at + 1] and (out[at], out[at + 1]) == (words[at + 1], words[at])
    assert builder.example("p#0:0:0", ["42", "(1)"], row) is None  # nothing to swap: no example


@pytest.mark.parametrize("code", LANGUAGES)
def test_evaluation_phrases_are_not_training_phrases_and_come_from_other_pages(code) -> None:
    folder = ROOT / "tasks" / f"manpages-{code}-order"
    splits = {s: _rows(folder / f"{s}.jsonl.gz") for s in ("train", "validation", "test")}
    def originals(rows):
        out = set()
        for r in rows:
            words = r["text"].split()
            at = r["meta"]["swapped_at"]
            if at is not None:
                words[at], words[at + 1] = words[at + 1], words[at]
            out.add(" ".join(words).lower())
        return out
    train, validation, test = (originals(splits[s]) for s in ("train", "validation", "test"))
    assert not (train & validation) and not (train & test) and not (validation & test)
    pages = {s: {r["meta"]["page"] for r in rows} for s, rows in splits.items()}
    assert not (pages["train"] & pages["test"]) and not (pages["validation"] & pages["test"])
    labels = Counter(r["label"] for r in splits["test"])
    assert abs(labels["swapped"] - labels["original"]) < 0.1 * len(splits["test"])


@pytest.mark.parametrize("code", LANGUAGES)
def test_no_evaluation_page_is_in_the_pretraining_corpus_or_the_english_one(code) -> None:
    language = _builder().LANGUAGES[code]
    evaluation = {
        r["meta"]["page"]
        for s in ("validation", "test")
        for r in _rows(ROOT / "tasks" / f"manpages-{code}-order" / f"{s}.jsonl.gz")
    }
    corpus = {r["id"].split(":", 1)[1] for r in _rows(ROOT / "manpages" / language.corpus_file)}
    english = {r["id"].split(":", 1)[1] for r in _rows(ROOT / "manpages" / language.english_corpus)}
    assert evaluation and corpus and english
    assert not (evaluation & corpus) and not (evaluation & english)
