"""The whole corpus stage on small data: counts, determinism, resume, skip, bad input, the law sample."""

from __future__ import annotations

import gzip
import json
import logging
import random

import pytest
from huggingface_hub import DatasetCard

from domainbert.config.domain import load_domain
from domainbert.core.artifacts import content_hash
from domainbert.core.paths import RunLayout
from domainbert.corpus.build import build_corpus, prepare, stage_fingerprint
from domainbert.corpus.shards import iter_input_shards, process_input_shard
from domainbert.corpus.store import count_documents, iter_documents
from support.corpus import corpus_cfg, doc, make_inputs, shard_bytes


def test_build_counts_outputs_and_skip(tmp_path, caplog):
    known = make_inputs(tmp_path)
    layout = RunLayout(tmp_path / "run")
    m = build_corpus(corpus_cfg(tmp_path), layout)
    assert m["documents_in"] == known["in"]
    assert m["filters"]["min_length_v1"] == {"dropped": known["short"], "reasons": {"too_few_words": known["short"]}}
    assert m["dedup"]["exact_removed"] == known["exact"]
    assert m["dedup"]["near_removed"] == known["near"] and m["dedup"]["near_clusters"] == known["near"]
    assert m["decontamination"]["by_task_split"]["toy/test"]["documents"] == known["contaminated"]
    out = known["in"] - known["short"] - known["exact"] - known["near"] - known["contaminated"]
    assert m["documents_out"] == out
    assert count_documents(layout.corpus, "train") == m["documents"]["train"]
    assert count_documents(layout.corpus, "validation") == m["documents"]["validation"] > 0
    docs = list(iter_documents(layout.corpus, "train"))
    assert len({d["id"] for d in docs}) == len(docs) and {d["source"] for d in docs} == {"a", "b"}
    assert m["sources"]["a"]["documents_in"] == 300 and m["sources"]["b"]["documents_in"] == 125
    assert m["estimated_tokens"]["train"] == round(m["words"]["train"] * 1.3)
    for name in ("report.md", "report.html", "length_histogram.png", "_domainbert.json"):
        assert (layout.corpus / name).is_file()
    assert "exact duplicates removed" in (layout.corpus / "report.md").read_text()
    card = DatasetCard.load(layout.corpus / "README.md")  # the Hub dataset card, as the Hub parses it
    assert card.data.task_categories == ["fill-mask"] and card.data.language == ["en"]
    assert card.data.size_categories == ["n<1K"] and "| a | 300 |" in card.text and str(tmp_path) not in str(card)
    assert f"| min_length_v1 | {known['short']} | too_few_words: {known['short']} |" in card.text
    assert f"{known['contaminated']} documents dropped" in card.text
    assert not (layout.root / "corpus.work" / stage_fingerprint(corpus_cfg(tmp_path))[:16]).exists()
    caplog.set_level(logging.INFO, logger="domainbert.corpus.build")
    assert build_corpus(corpus_cfg(tmp_path), layout) == m
    assert "skipped: up to date" in caplog.text


def test_deterministic_across_runs_and_worker_counts(tmp_path):
    make_inputs(tmp_path)
    one = RunLayout(tmp_path / "one")
    two = RunLayout(tmp_path / "two")
    build_corpus(corpus_cfg(tmp_path), one)
    build_corpus(corpus_cfg(tmp_path, workers=2), two)
    assert shard_bytes(one.corpus) == shard_bytes(two.corpus)


def test_resume_redoes_only_unfinished_shards(tmp_path, caplog):
    make_inputs(tmp_path)
    clean = RunLayout(tmp_path / "clean")
    build_corpus(corpus_cfg(tmp_path), clean)
    cfg = corpus_cfg(tmp_path)
    resumed = RunLayout(tmp_path / "resumed")
    work = resumed.root / "corpus.work" / stage_fingerprint(cfg)[:16]
    # What a build killed during its third shard leaves behind: two shards done, one half-written.
    prepare(cfg, work)
    specs = iter_input_shards(cfg, work, {})
    for _ in range(2):
        process_input_shard(cfg, next(specs), work)
    third = next(specs)
    (work / "processed" / "shard-00002.arrow.tmp").write_bytes(b"half a file")
    (work / "processed" / "shard-00002.sig.npy").write_bytes(b"\x93NUMPY truncated")
    del specs, third
    caplog.set_level(logging.INFO, logger="domainbert.corpus.build")
    build_corpus(cfg, resumed)
    assert "2 already processed" in caplog.text
    assert shard_bytes(resumed.corpus) == shard_bytes(clean.corpus)


def test_empty_after_filtering_and_malformed_counts(tmp_path):
    make_inputs(tmp_path)
    with gzip.open(tmp_path / "a.jsonl.gz", "at") as f:
        f.write("{broken\n")
    with pytest.raises(Exception, match="a.jsonl.gz:301"):
        build_corpus(corpus_cfg(tmp_path), RunLayout(tmp_path / "strict"))
    m = build_corpus(corpus_cfg(tmp_path, max_malformed_lines=1, write_dropped=True), RunLayout(tmp_path / "lenient"))
    assert m["malformed_lines"] == {"total": 1, "by_source": {"a": {"invalid_json": 1}}}
    with gzip.open(tmp_path / "lenient" / "corpus" / "dropped.jsonl.gz", "rt") as f:
        dropped = [json.loads(line) for line in f]
    assert sorted(d["reason"] for d in dropped) == ["decontamination:overlap"] + ["min_length_v1:too_few_words"] * 5
    cfg = corpus_cfg(tmp_path, max_malformed_lines=1, filters=[{"name": "min_length_v1", "options": {"min_words": 999}}])
    with pytest.raises(Exception, match="empty after filtering"):
        build_corpus(cfg, RunLayout(tmp_path / "empty"))
    assert not (tmp_path / "empty" / "corpus").exists()


def test_law_sample_contamination_is_found(tmp_path):
    """The shipped law corpus contains the licence-category eval texts; the build must remove them."""
    source = "[{type: local, name: scancode-licenses, paths: [../corpora/law/licenses.jsonl.gz], max_documents: 40}]"
    cfg = load_domain("law", [f"corpus.sources={source}", "corpus.workers=1", "corpus.filters=[]",
                              "corpus.validation_fraction=0.1"])
    m = build_corpus(cfg, RunLayout(tmp_path / "law"))
    by_task = m["decontamination"]["by_task_split"]
    removed = sum(v["documents"] for v in by_task.values())
    assert removed >= 5 and set(by_task) == {"law-license-category/test", "law-license-category/validation"}
    assert m["documents_out"] == 40 - removed - m["dedup"]["exact_removed"] - m["dedup"]["near_removed"]


def test_cut_sentences_are_gone_from_the_built_corpus(tmp_path):
    """A document with one contaminated sentence among clean ones keeps only the clean ones in the output."""
    rng = random.Random(3)
    clean = [doc(rng, 30) for _ in range(4)]
    eval_text = doc(rng, 20)
    mixed = f"{clean[0]} {clean[1]} {eval_text} {clean[2]}"
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"id": f"a{i}", "text": t}) + "\n" for i, t in enumerate([mixed, clean[3]]))
    task = tmp_path / "task"
    task.mkdir()
    for split, text in (("test", eval_text), ("validation", "other text")):
        with gzip.open(task / f"{split}.jsonl.gz", "wt") as f:
            f.write(json.dumps({"text": text, "label": "x"}) + "\n")
    cfg = corpus_cfg(tmp_path, sources=[{"type": "local", "name": "a", "paths": [str(tmp_path / "a.jsonl.gz")]}],
               validation_fraction=0.01)
    m = build_corpus(cfg, RunLayout(tmp_path / "run"))
    texts = {d["id"]: d["text"] for split in ("train", "validation")
             for d in iter_documents(tmp_path / "run" / "corpus", split)}
    assert texts["a0"] == f"{clean[0]} {clean[1]} {clean[2]}"
    assert m["decontamination"]["sentences_removed"] == 1 and m["decontamination"]["documents_removed"] == 0


@pytest.mark.slow
def test_sigkill_then_restart_gives_identical_output(tmp_path, caplog):
    """A build killed with SIGKILL mid-way and restarted matches an uninterrupted build byte for byte."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    make_inputs(tmp_path)
    cfg = corpus_cfg(tmp_path, shard_documents=20)
    data = cfg.model_dump(mode="json")
    data.pop("profile")
    data["profiles"] = {"offline": {}}
    domain_file = tmp_path / "toy.yaml"
    domain_file.write_text(yaml.safe_dump(data))
    killed = RunLayout(tmp_path / "killed")
    work = killed.root / "corpus.work" / stage_fingerprint(cfg)[:16] / "processed"
    code = ("import sys; from domainbert.config.domain import load_domain; from domainbert.corpus.build import build_corpus;"
            "from pathlib import Path; from domainbert.core.paths import RunLayout;"
            "build_corpus(load_domain(sys.argv[1]), RunLayout(Path(sys.argv[2])))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(domain_file), str(killed.root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and len(list(work.glob("*.json"))) < 3:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(work.glob("*.json")))
    assert 0 < done_before < 20, "the build must be killed part-way (20 input shards)"
    caplog.set_level(logging.INFO, logger="domainbert.corpus.build")
    build_corpus(load_domain(domain_file), killed)
    assert f"{done_before} already processed" in caplog.text
    clean = RunLayout(tmp_path / "clean")
    build_corpus(corpus_cfg(tmp_path, shard_documents=20), clean)
    assert shard_bytes(killed.corpus) == shard_bytes(clean.corpus)


def test_a_build_interrupted_and_resumed_has_the_hash_of_an_uninterrupted_one(tmp_path, monkeypatch):
    """A resumed shard's record is read back from its file, a fresh one is built in memory: the corpus (its
    report's filter order, reasons and drop samples included) must not tell them apart."""
    import domainbert.corpus.build as build

    make_inputs(tmp_path)
    rng = random.Random(3)
    lengths = (2, 60, 20)  # short (min_length drops it), long (max_length drops it), kept
    (tmp_path / "c.txt").write_text("\n".join(doc(rng, lengths[i % 3]) for i in range(300)) + "\n")
    # The pipeline's order is not the names' order, so an order taken from a sorted record would show.
    filters = [{"name": "min_length_v1", "options": {"min_words": 5}},
               {"name": "max_length_v1", "options": {"max_words": 50}}]
    sources = [{"type": "local", "name": "c", "paths": [str(tmp_path / "c.txt")], "format": "text_lines"}]
    cfg = corpus_cfg(tmp_path, sources=sources, filters=filters)
    clean = RunLayout(tmp_path / "clean")
    build_corpus(cfg, clean)

    real, calls = build.process_input_shard, []

    def killed_after_two(*args):
        calls.append(1)
        if len(calls) > 2:
            raise KeyboardInterrupt("killed")
        return real(*args)

    resumed = RunLayout(tmp_path / "resumed")
    monkeypatch.setattr(build, "process_input_shard", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        build_corpus(cfg, resumed)
    monkeypatch.setattr(build, "process_input_shard", real)
    build_corpus(cfg, resumed)
    assert content_hash(resumed.corpus) == content_hash(clean.corpus)
    report = (clean.corpus / "report.md").read_text()
    assert report.index("| min_length_v1 | too_few_words |") < report.index("| max_length_v1 | too_many_words |")
