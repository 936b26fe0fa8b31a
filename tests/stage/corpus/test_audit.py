"""The leakage audit: its own normalisation and matching, its manifest and report, and the build failing on a
leak unless the domain allows it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from domainbert.config.finetune import TaskConfig
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.corpus.audit import LeakAudit, normalise
from domainbert.corpus.build import build_corpus

LONG = ("the scheduler picks the next runnable thread from the queue and hands it the processor until it blocks "
        "or its time slice runs out")


def _audit(texts: dict[str, list[str]], docs: list[str], ngram: int = 8, min_words: int = 4) -> dict:
    audit = LeakAudit(texts, ngram, min_words)
    audit.add([f"d{i}" for i in range(len(docs))], docs)
    return audit.result()


def test_normalise_keeps_words_apart_and_documents_apart():
    out = normalise(["Hello,  WORLD!", "", "snake_case x-y"]).tobytes().decode("utf-32-le")
    assert out == "\n hello world \n \n snake_case x y \n "


def test_verbatim_matches_word_aligned_across_sentences_not_across_documents():
    texts = {"t/test": ["Compiler: a program. See Interpreter.", "interest rates rose. Banks", "ok then",
                        "lone words here now"]}
    docs = ["Glossary. COMPILER -- a program; see interpreter! The end.",  # punctuation and case differ
            "In March interest rates rose.", "Banks reacted.",  # the second text split over two documents
            "ok then", "I said ok then.",  # a two-word text: whole documents only
            "alone words here nowhere"]  # only inside words: no match
    r = _audit(texts, docs)["t/test"]
    assert r["verbatim"] == 2 and r["whole_document_texts"] == 1
    assert [e["document"] for e in r["examples"]] == ["d0", "d3"]


def test_long_text_is_verbatim_only_when_all_of_it_is_in_one_document():
    words = LONG.split()
    head, tail = " ".join(words[:10]), " ".join(words[10:])
    docs = [f"{head} and then something else entirely", f"{head} {tail}".upper(), f"x {LONG} y"]
    r = _audit({"t/test": [LONG]}, docs[:1], ngram=8)["t/test"]
    assert r["verbatim"] == 0 and r["texts_with_ngram_hits"] == 1  # its first 8 words, not all of it
    assert [e["document"] for e in _audit({"t/test": [LONG]}, docs, ngram=8)["t/test"]["examples"]] == ["d1"]


def test_ngram_counts_per_text():
    words = LONG.split()
    half = " ".join(words[:12])  # 12 words: 5 of the text's 8-grams, nothing verbatim
    r = _audit({"t/validation": [LONG, "short text only here"]}, [f"Intro. {half}. Outro."])["t/validation"]
    assert r["verbatim"] == 0 and r["ngram_texts"] == 1 and r["texts_with_ngram_hits"] == 1
    assert (r["ngrams_found"], r["ngrams"]) == (5, len(words) - 7)
    assert r["ngram_examples"][0]["document"] == "d0"


def _jsonl_task(folder: Path, test: list[str], validation: list[str]) -> TaskConfig:
    folder.mkdir()
    for split, texts in (("train", ["unused"]), ("validation", validation), ("test", test)):
        with gzip.open(folder / f"{split}.jsonl.gz", "wt") as f:
            f.writelines(json.dumps({"text": t, "label": "x"}) + "\n" for t in texts)
    return TaskConfig(name="defs", type="classification", format="jsonl", path=str(folder), labels=["x"])


FILLER = [f"document number {i} talks about caching, paging and the memory hierarchy at some length." for i in range(30)]


def test_planted_leak_fails_the_build_and_nothing_is_marked_complete(tmp_path, small_domain):
    entry = "Kernel: the core of an operating system. See Process."
    task = _jsonl_task(tmp_path / "task", [entry, LONG], ["Thread: a unit of execution. See Kernel."])
    cfg = small_domain(FILLER + [entry, f"{' '.join(FILLER[:3])} {LONG}."], [task], enabled=False)
    layout = RunLayout(tmp_path / "run")
    with pytest.raises(DataError) as err:
        build_corpus(cfg, layout)
    message = str(err.value)
    assert "2 evaluation texts are in the corpus verbatim (defs/test: 2)" in message and "\n" not in message
    assert "allow_leaks" in message and "Kernel: the core" in message
    assert not layout.corpus.exists()
    details = json.loads(Path(message.split("examples in ")[1].split(";")[0]).read_text())
    assert details["by_task_split"]["defs/test"]["verbatim"] == 2
    # with decontamination on, the same build passes with nothing left to find
    m = build_corpus(cfg.model_copy(update={"corpus": cfg.corpus.model_copy(update={
        "decontamination": cfg.corpus.decontamination.model_copy(update={"enabled": True})})}), layout)
    assert m["audit"]["verbatim"] == 0 and m["audit"]["by_task_split"]["defs/test"]["texts_with_ngram_hits"] == 0
    assert m["documents_out"] == len(FILLER) + 1


def test_allowed_leak_is_built_and_shown_in_red(tmp_path, small_domain):
    entry = "Kernel: the core of an operating system. See Process."
    task = _jsonl_task(tmp_path / "task", [entry], ["Thread: a unit of execution. See Kernel."])
    cfg = small_domain(FILLER + [entry], [task], enabled=False, allow_leaks=True)
    layout = RunLayout(tmp_path / "run")
    m = build_corpus(cfg, layout)
    audit = m["audit"]
    assert audit["verbatim"] == 1 and audit["by_task_split"]["defs/test"]["examples"][0]["document"] == "doc30"
    assert audit["by_task_split"]["defs/validation"]["verbatim"] == 0
    html = (layout.corpus / "report.html").read_text()
    assert '<td class="alert">1</td>' in html and "allowed by" in html
    assert "Kernel: the core of an operating system. See Process." in (layout.corpus / "report.md").read_text()


def test_unreachable_hub_task_is_a_warning_in_the_report(tmp_path, small_domain):
    local = _jsonl_task(tmp_path / "task", ["a test sentence of some length here"], ["validation words go here"])
    hub = TaskConfig(name="remote", type="classification", format="hf", path="nobody/no-such-dataset-xyz",
                     labels=["a"])
    m = build_corpus(small_domain(FILLER, [local, hub]), RunLayout(tmp_path / "run"))
    assert set(m["audit"]["not_checked"]) == {"remote/validation", "remote/test"}
    assert set(m["audit"]["by_task_split"]) == {"defs/validation", "defs/test"}
    html = (tmp_path / "run" / "corpus" / "report.html").read_text()
    assert '<td class="alert">not checked: hub dataset not read' in html
    assert "Not checked: remote/test, remote/validation." in html
