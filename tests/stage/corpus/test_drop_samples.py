"""The per-filter sample of dropped documents: independent of sharding, decontamination left out, rendered."""

from __future__ import annotations

import logging
import random

from domainbert.corpus import drop_samples


def _docs(n: int, seed: int = 0):
    rng = random.Random(seed)
    ids = [f"doc-{i}" for i in range(n)]
    sources = [rng.choice(["a", "b"]) for _ in range(n)]
    reasons = [rng.choice([None, None, "language_id_v2:language_de", "min_length_v1:too_few_words",
                           "decontamination:overlap"]) for _ in range(n)]
    texts = [f"text of document {i} " * 40 for i in range(n)]
    return ids, sources, reasons, texts


def test_sample_is_the_same_whatever_the_shards():
    ids, sources, reasons, texts = _docs(500)
    whole = drop_samples.merge([drop_samples.shard_sample(ids, sources, reasons, texts)])
    shards = [drop_samples.shard_sample(ids[i:i + 37], sources[i:i + 37], reasons[i:i + 37], texts[i:i + 37])
              for i in range(0, 500, 37)]
    assert drop_samples.merge(shards + [None]) == whole
    assert set(whole) == {"language_id_v2", "min_length_v1"}  # decontamination is left out
    for name, rows in whole.items():
        assert len(rows) == drop_samples.K
        for row in rows:
            i = ids.index(row["id"])
            assert reasons[i] == f"{name}:{row['reason']}" and row["source"] == sources[i]
            assert row["text"] == texts[i][: drop_samples.MAX_CHARS] and "key" not in row


def test_documents_decontamination_cut_are_left_out():
    ids, sources, reasons, texts = _docs(200)
    recut = {i for i, r in enumerate(reasons) if r == "min_length_v1:too_few_words"}
    sample = drop_samples.shard_sample(ids, sources, reasons, texts, recut=recut)
    assert "min_length_v1" not in sample and "language_id_v2" in sample


def test_report_table_lists_the_examples():
    examples = {"min_length_v1": [{"reason": "too_few_words", "source": "a", "id": "x", "text": "a\nb"}]}
    [(title, header, rows)] = drop_samples.report_tables(examples)
    assert "sample" in title and header[0] == "filter"
    assert rows == [["min_length_v1", "too_few_words", "a", "x", "a b"]]
    assert drop_samples.report_tables({}) == []


def test_build_writes_the_sample_and_a_true_log_line(tmp_path, caplog):
    from domainbert.core.paths import RunLayout
    from domainbert.corpus.build import build_corpus
    from support.corpus import corpus_cfg, make_inputs

    known = make_inputs(tmp_path)
    layout = RunLayout(tmp_path / "run")
    caplog.set_level(logging.INFO, logger="domainbert.corpus.build")
    m = build_corpus(corpus_cfg(tmp_path), layout)
    sample = m["filter_examples"]["min_length_v1"]
    assert len(sample) == known["short"] and {(r["text"], r["reason"]) for r in sample} == {
        ("too short", "too_few_words")}
    assert "decontamination" not in m["filter_examples"]
    md = (layout.corpus / "report.md").read_text()
    assert "Dropped documents: a sample" in md and "| min_length_v1 | too_few_words | b |" in md
    assert "input shards processed" in caplog.text and "resumed" not in caplog.text  # a fresh build
