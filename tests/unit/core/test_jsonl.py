"""The one JSONL reader: records with their line numbers, any compression, one DataError per fault."""

from __future__ import annotations

import gzip
import lzma

import pytest

from domainbert.core.errors import DataError
from domainbert.core.jsonl import iter_records, iter_texts, read_records


def test_records_with_line_numbers_from_compressed_files(tmp_path):
    body = b'{"text": "a"}\n\n{"text": "b", "n": 2}\n'
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(body))
    (tmp_path / "b.jsonl.xz").write_bytes(lzma.compress(body))
    for name in ("a.jsonl.gz", "b.jsonl.xz"):
        assert list(iter_records(tmp_path / name)) == [(1, {"text": "a"}), (3, {"text": "b", "n": 2})]
    assert list(iter_texts([tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.xz"])) == ["a", "b", "a", "b"]
    assert read_records(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize("line,message", [(b'{"text": "caf\xe9"}', "not UTF-8 text (byte 0xe9)"),
                                          (b'{"text": ', "invalid JSON"), (b'["a"]', "must be an object"),
                                          (b'{"title": "x"}', "'text' string field")])
def test_each_fault_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "fine"}\n' + line + b"\n")
    with pytest.raises(DataError) as err:
        list(iter_texts([path]))
    assert f"{path}:2" in str(err.value) and message in str(err.value)
