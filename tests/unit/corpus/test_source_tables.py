"""Arrow tables of a source: the same documents, ids, counts and errors as the Python reader, fast path or not."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

from domainbert.config.corpus import LocalSource
from domainbert.core.errors import DataError
from domainbert.corpus import source_tables
from domainbert.corpus.source_tables import iter_source_tables
from domainbert.corpus.sources import MalformedCounter, iter_source


def _src(paths, **kw):
    return LocalSource(type="local", name="s", paths=[str(p) for p in paths], **kw)


def _both(source, limit=0):
    """(documents from iter_source, documents from iter_source_tables) with their malformed counters."""
    a, b = MalformedCounter(limit), MalformedCounter(limit)
    plain = list(iter_source(source, a))
    tables = list(iter_source_tables(source, b))
    docs = pa.concat_tables(tables).to_pylist() if tables else []
    for d in plain:
        d["meta"] = json.dumps(d["meta"], sort_keys=True, ensure_ascii=False) if d["meta"] else "{}"
    assert (a.total, a.by_source) == (b.total, b.by_source)
    return plain, docs


def _lines(n, start=0, **extra):
    return [json.dumps({"id": f"d{i}", "text": f"document number {i}", **extra}) for i in range(start, start + n)]


def test_plain_jsonl_takes_the_arrow_path_with_the_same_ids(tmp_path, monkeypatch):
    calls = []
    original = source_tables._documents_table
    monkeypatch.setattr(source_tables, "_documents_table", lambda *a: calls.append(1) or original(*a))
    lines = _lines(3) + ["", json.dumps({"text": "no id"}), json.dumps({"id": "", "text": "empty id"}),
                        json.dumps({"id": None, "text": "null id"})]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps({"id": i, "text": f"int id {i}"}) for i in range(4)) + "\n")
    plain, docs = _both(_src([tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"]))
    assert docs == plain and len(docs) == 10 and calls
    assert [d["id"] for d in docs[3:6]] == ["s:3", "s:4", "s:5"] and docs[6]["id"] == "0"


def test_a_bad_line_after_many_blocks_hands_over_to_the_python_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(source_tables, "BLOCK_BYTES", 4096)  # many Arrow blocks before the bad line
    lines = _lines(500) + ["not json", json.dumps({"id": "x", "title": "no text"})] + _lines(300, start=500)
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    plain, docs = _both(_src([tmp_path / "a.jsonl"]), limit=5)
    assert docs == plain and len(docs) == 800
    with pytest.raises(DataError, match=r"a\.jsonl.*501|501.*a\.jsonl"):
        list(iter_source_tables(_src([tmp_path / "a.jsonl"]), MalformedCounter(0)))


def test_other_fields_types_and_caps_match_the_python_reader(tmp_path):
    (tmp_path / "meta.jsonl").write_text("\n".join(_lines(5, meta={"url": "u"})) + "\n")
    (tmp_path / "extra.jsonl").write_text("\n".join(_lines(5, lang="en")) + "\n")
    (tmp_path / "dates.jsonl").write_text('{"id": "2020-01-01", "text": "2021-02-02"}\n')
    (tmp_path / "mixed.jsonl").write_text('{"id": 1, "text": "a"}\n{"id": "b", "text": "c"}\n{"id": 2.5, "text": "d"}\n')
    (tmp_path / "d.txt").write_text("line one\nline two\n")
    for files, cap in ((["meta.jsonl"], None), (["extra.jsonl"], None), (["dates.jsonl"], None),
                       (["mixed.jsonl"], None), (["meta.jsonl", "d.txt", "extra.jsonl"], 8),
                       (["extra.jsonl", "meta.jsonl"], 3)):
        plain, docs = _both(_src([tmp_path / f for f in files], max_documents=cap))
        assert docs == plain, files
    assert len(_both(_src([tmp_path / "extra.jsonl"], max_documents=3))[1]) == 3


def test_documents_over_the_size_cap_are_skipped_the_same_on_both_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(source_tables, "BLOCK_BYTES", 4096)
    lines = _lines(40) + [json.dumps({"id": "mid", "text": "m" * 3000}),  # inside a block, over the cap
                          json.dumps({"id": "big", "text": "b" * 100_000})] + _lines(40, start=40)  # over a block
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    source = _src([tmp_path / "a.jsonl"])
    a, b = MalformedCounter(0, max_document_bytes=2048), MalformedCounter(0, max_document_bytes=2048)
    plain = list(iter_source(source, a))
    docs = pa.concat_tables(list(iter_source_tables(source, b))).to_pylist()
    assert [d["id"] for d in docs] == [d["id"] for d in plain] == [f"d{i}" for i in range(80)]
    assert a.by_source == b.by_source == {"s": {"over_max_document_bytes": 2}}
