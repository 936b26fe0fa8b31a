"""Reading sources: formats, compression, ids, caps and every kind of bad input."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from domainbert.config.corpus import LocalSource
from domainbert.core.errors import DataError
from domainbert.corpus.sources import MalformedCounter, iter_source


def _src(paths, **kw):
    return LocalSource(type="local", name="s", paths=[str(p) for p in paths], **kw)


def _read(source, limit=0):
    counter = MalformedCounter(limit)
    return list(iter_source(source, counter)), counter


JSONL = b'{"id": "a", "text": "first doc"}\n{"text": "no id here"}\n'


@pytest.mark.parametrize("suffix,compress", [
    ("jsonl", lambda b: b), ("jsonl.gz", gzip.compress), ("jsonl.bz2", bz2.compress),
    ("jsonl.xz", lzma.compress), ("jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
])
def test_jsonl_any_compression_and_ids(tmp_path, suffix, compress):
    path = tmp_path / f"d.{suffix}"
    path.write_bytes(compress(JSONL))
    docs, _ = _read(_src([path]))
    assert [d["text"] for d in docs] == ["first doc", "no id here"]
    assert [d["id"] for d in docs] == ["a", "s:1"]  # own id, else source + position
    assert {d["source"] for d in docs} == {"s"}


def test_text_csv_tsv_json_parquet(tmp_path):
    (tmp_path / "l.txt").write_text("one line\n\ntwo line\n")
    (tmp_path / "b.txt").write_text("para one\nstill one\n\npara two\n")
    (tmp_path / "c.csv").write_text('title,abstract\nT1,"A, one"\nT2,A2\n')
    (tmp_path / "t.tsv").write_text("text\tid\nhello\tx1\n")
    (tmp_path / "j.json").write_text(json.dumps({"data": [{"text": "j1"}, {"text": "j2"}]}))
    pq.write_table(pa.table({"text": ["p1", "p2"], "id": ["q1", "q2"]}), tmp_path / "p.parquet")
    assert [d["text"] for d in _read(_src([tmp_path / "l.txt"]))[0]] == ["one line", "two line"]
    blocks = _read(_src([tmp_path / "b.txt"], format="text_blocks"))[0]
    assert [d["text"] for d in blocks] == ["para one\nstill one", "para two"]
    csv_docs = _read(_src([tmp_path / "c.csv"], text_template="{title}: {abstract}"))[0]
    assert [d["text"] for d in csv_docs] == ["T1: A, one", "T2: A2"]
    assert _read(_src([tmp_path / "t.tsv"]))[0][0] == {"id": "x1", "text": "hello", "source": "s", "meta": {}}
    assert [d["text"] for d in _read(_src([tmp_path / "j.json"]))[0]] == ["j1", "j2"]
    assert [d["id"] for d in _read(_src([tmp_path / "p.parquet"]))[0]] == ["q1", "q2"]


def test_glob_order_and_cap(tmp_path):
    for i in range(3):
        (tmp_path / f"part-{i}.jsonl").write_text("".join(json.dumps({"text": f"{i}-{j}"}) + "\n" for j in range(4)))
    docs, _ = _read(_src([tmp_path / "part-*.jsonl"], max_documents=6))
    assert [d["text"] for d in docs] == ["0-0", "0-1", "0-2", "0-3", "1-0", "1-1"]
    assert [d["id"] for d in docs][-1] == "s:5"


def test_glob_matching_nothing(tmp_path):
    with pytest.raises(DataError, match="no file matches") as err:
        _read(_src([tmp_path / "nothing-*.jsonl"]))
    assert "nothing-*.jsonl" in str(err.value)


def test_corrupt_gzip_names_file(tmp_path):
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(gzip.compress(JSONL * 50)[:-30] + b"garbage")
    with pytest.raises(DataError, match="corrupt") as err:
        _read(_src([path]))
    assert str(path) in str(err.value)


@pytest.mark.parametrize("bad,reason", [(b"{not json\n", "invalid_json"), (b'{"title": "x"}\n', "missing_text"),
                                        (b'{"text": "caf\xe9"}\n', "not_utf8")])
def test_malformed_line_is_error_or_counted(tmp_path, bad, reason):
    path = tmp_path / "d.jsonl"
    path.write_bytes(JSONL + bad + b'{"text": "after"}\n')
    with pytest.raises(DataError) as err:
        _read(_src([path]))
    assert f"{path}:3" in str(err.value)
    docs, counter = _read(_src([path]), limit=1)
    assert [d["text"] for d in docs] == ["first doc", "no id here", "after"]
    assert counter.total == 1 and counter.by_source == {"s": {reason: 1}}


@pytest.mark.parametrize("fmt,ext,build", [
    ("jsonl", "jsonl", lambda big: JSONL + json.dumps({"text": big}).encode() + b'\n{"text": "after"}\n'),
    ("text_lines", "txt", lambda big: b"first doc\n" + big.encode() + b"\nafter\n"),
    ("text_blocks", "txt", lambda big: b"first doc\n\n" + (big[:600] + "\n") .encode() * 4 + b"\nafter\n"),
])
def test_a_document_over_the_size_cap_is_skipped_counted_and_never_an_error(tmp_path, fmt, ext, build):
    path = tmp_path / f"d.{ext}.gz"
    path.write_bytes(gzip.compress(build("word " * 2000)))
    counter = MalformedCounter(0, max_document_bytes=2048)
    docs = list(iter_source(_src([path], format=fmt), counter))
    assert docs[-1]["text"] == "after" and "word word" not in "".join(d["text"] for d in docs)
    assert counter.total == 0 and counter.by_source == {"s": {"over_max_document_bytes": 1}}


def test_a_line_at_the_cap_is_kept(tmp_path):
    line = json.dumps({"text": "x" * 100}).encode()
    path = tmp_path / "d.jsonl"
    path.write_bytes(line + b"\n" + line)  # the last line has no newline
    docs = list(iter_source(_src([path]), MalformedCounter(0, max_document_bytes=len(line))))
    assert len(docs) == 2
    counter = MalformedCounter(0, max_document_bytes=len(line) - 1)
    assert list(iter_source(_src([path]), counter)) == [] and counter.by_source["s"]["over_max_document_bytes"] == 2


def test_csv_field_over_the_cap_is_one_clear_error(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("text\n" + "y" * 5000 + "\n")
    with pytest.raises(DataError, match="field larger") as err:
        list(iter_source(_src([path]), MalformedCounter(0, max_document_bytes=2048)))
    assert str(path) in str(err.value)
