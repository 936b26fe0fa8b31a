"""The vocab stage end to end on a tiny corpus, a tiny reference and a 2-layer base model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from domainbert.config.vocab import RecommendConfig
from domainbert.core.artifacts import RECORD, read_record
from domainbert.core.errors import DataError
from domainbert.core.models import load_mlm_model
from domainbert.core.paths import RunLayout
from domainbert.vocab.control import take_words
from domainbert.vocab.recommend import recommend
from domainbert.vocab.stage import run_vocab
from support.vocab import make_texts, stage_cfg, stage_overrides, write_corpus

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@pytest.mark.slow
def test_run_vocab_end_to_end_and_skip(tmp_path, corpus, control_file, tiny_base):
    layout = RunLayout(tmp_path / "run")
    (tmp_path / "run").mkdir()
    corpus.rename(layout.corpus)
    report = run_vocab(stage_cfg(tiny_base, control_file, "tokenizer.vocab_size=null"), layout)
    # no vocab_size configured: the base model's
    assert report["tokenizer"]["vocab_size"] == AutoTokenizer.from_pretrained(str(tiny_base)).vocab_size
    for name in ("report.json", "report.md", "report.html", "overlap_curve.png", "fertility.png"):
        assert (layout.vocab / name).is_file(), name
    # the headline overlap is SciBERT's entry-by-entry comparison (specials left out), recomputed from the files
    dom = [t for t in AutoTokenizer.from_pretrained(str(layout.tokenizer)).get_vocab() if t not in SPECIAL]
    ref = set((tiny_base / "vocab.txt").read_text().split())
    expected = sum(t in ref for t in dom) / len(dom)
    assert report["overlap"]["tiny"]["domain"]["domain_in_reference"] == pytest.approx(expected)
    # the control text supports fewer than 300 tokens: the last point is at what both reached, not at 300
    assert report["curve"]["sizes"] == [150, min(report["curve"]["reach"].values())]
    assert report["curve"]["unreached"] == [300] and len(report["curve"]["control"]["tiny"]) == 2
    assert set(report["heldout"]) == {"tiny", "base", "domain", "extended"}
    assert report["recommendation"]["decision"] in ("continue", "extend", "scratch")
    assert "42.0%" in report["published"][0]["sentence"]
    assert json.loads((layout.vocab / "report.json").read_text())["recommendation"] == report["recommendation"]
    assert "Recommendation" in (layout.vocab / "report.md").read_text()
    model = load_mlm_model(layout.extended_model)
    assert model.config.vocab_size == load_mlm_model(str(tiny_base)).config.vocab_size + 3
    assert read_record(layout.extended_model) is not None and read_record(layout.tokenizer) is not None

    finished = read_record(layout.vocab)["finished_at"]
    again = run_vocab(stage_cfg(tiny_base, control_file, "tokenizer.vocab_size=null"), layout)
    assert read_record(layout.vocab)["finished_at"] == finished  # skipped: up to date
    assert again["overlap"] == report["overlap"]


_RUN_VOCAB = """
import json, sys
from pathlib import Path
from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.vocab.stage import run_vocab
run_vocab(load_domain("science", json.loads(sys.argv[2])), RunLayout(Path(sys.argv[1])))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind,sizes", [("wordpiece", ()), ("sentencepiece_unigram", ("tokenizer.vocab_size=120",
                                                                                      "vocab.curve_sizes=[60, 120]"))])
def test_same_inputs_give_a_byte_identical_tokenizer_and_extended_model(tmp_path, corpus, control_file, tiny_base,
                                                                        kind, sizes):
    # Two processes with different hash seeds: Python's set and dict order and the tokenizers library's own
    # hash maps must not leak into the ids.
    overrides = stage_overrides(tiny_base, control_file, f"tokenizer.kind={kind}", *sizes)
    folders = []
    for seed in ("1", "2"):
        layout = RunLayout(tmp_path / f"run-{seed}")
        shutil.copytree(corpus, layout.corpus)
        done = subprocess.run([sys.executable, "-c", _RUN_VOCAB, str(layout.root), json.dumps(overrides)],
                              env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        folders.append(layout)
    for pick in (lambda lay: lay.tokenizer, lambda lay: lay.extended_model):
        a, b = (pick(lay) for lay in folders)
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and p.name != RECORD)
        assert files and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file() and p.name != RECORD)
        for name in files:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert read_record(folders[0].tokenizer)["content_hash"] == read_record(folders[1].tokenizer)["content_hash"]


def test_too_small_or_empty_corpus(tmp_path, control_file, tiny_base):
    layout = RunLayout(tmp_path / "run")
    write_corpus(layout.corpus, make_texts(30, 1), make_texts(5, 2))
    with pytest.raises(DataError, match="too small"):
        run_vocab(stage_cfg(tiny_base, control_file), layout)
    assert not layout.vocab.exists()
    write_corpus(layout.corpus, [], make_texts(5, 2))
    with pytest.raises(DataError, match="empty"):
        run_vocab(stage_cfg(tiny_base, control_file), layout)


def test_take_words_spreads_evenly():
    texts = [f"w{i} x" for i in range(100)]  # 2 words each, 200 words
    kept = list(take_words(lambda: iter(texts), 200, 50))
    assert sum(len(t.split()) for t in kept) == 50
    assert kept[0] == "w0 x" and kept[-1] in ("w96 x", "w97 x", "w95 x")
    assert list(take_words(lambda: iter(texts), 200, 500)) == texts


def test_recommendation_rules():
    t = RecommendConfig()
    cands = [{"word": "abc", "count": 100, "pieces": ["a", "##b", "##c"]},
             {"word": "abd", "count": 1, "pieces": ["a", "##b", "##d"]}]
    fits = {"shift": 0.01, "saving": 0.01, "fertility": 1.1, "unk_rate": 0.0}
    assert recommend(fits, cands, 10**6, t)["decision"] == "continue"
    shifted = {**fits, "shift": 0.12}
    out = recommend(shifted, cands, 10**6, t)
    assert out["decision"] == "extend" and out["extend_tokens"] == 1  # 100 per million qualifies, 1 does not
    assert out["extend_words"] == ["abc"]
    assert recommend(shifted, cands, 10**9, t)["decision"] == "scratch"
    assert recommend(shifted, cands[1:], 10**6, t)["decision"] == "continue"
