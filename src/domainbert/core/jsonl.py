"""The one reader of JSON-lines files the pipeline reads whole (tasks, control and evaluation text, metrics).

``iter_records(path)`` yields ``(line number, object)`` for every non-blank line of a plain or compressed
(gzip, bz2, xz, zstd: by magic bytes) file, decoding line by line so that any fault is one ``DataError``
naming the file and line: bytes that are not UTF-8, a line that is not JSON, a record that is not an object.
``iter_texts(paths, field)`` yields one field of every record. The corpus stage's readers are different on
purpose (``corpus/sources.py``, ``source_tables.py``): they stream any size through Arrow, skip and count
malformed lines up to an allowance, and cap one document's size; this module is for files read in full.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from domainbert.core.errors import DataError
from domainbert.core.files import open_binary


@contextmanager
def text_lines(path: str | Path) -> Iterator[Iterator[str]]:
    """The lines of a plain or compressed text file, decoded one by one: bytes that are not UTF-8 are a
    ``DataError`` naming the file and line (the task readers' CoNLL and CSV files go through it too)."""
    path = Path(path)
    with open_binary(path) as raw:
        yield _decoded(raw, path)


def _decoded(raw: Iterable[bytes], path: Path) -> Iterator[str]:
    for lineno, line in enumerate(raw, 1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(
                f"not UTF-8 text (byte {line[exc.start]:#04x}); save the file as UTF-8", file=path, line=lineno
            ) from None


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each non-blank line of the JSONL file at ``path``."""
    with text_lines(path) as lines:
        for lineno, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON ({exc.msg})", file=path, line=lineno) from None
            if not isinstance(record, dict):
                raise DataError("a JSONL record must be an object", file=path, line=lineno)
            yield lineno, record


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All records of ``path`` (empty when the file does not exist)."""
    return [rec for _, rec in iter_records(path)] if Path(path).is_file() else []


def iter_texts(paths: Iterable[str | Path], field: str = "text") -> Iterator[str]:
    """The ``field`` of every record of ``paths`` in order; a record without it (or not a string) is an error."""
    for path in paths:
        for lineno, record in iter_records(path):
            value = record.get(field)
            if not isinstance(value, str):
                raise DataError(f"expected a JSON object with a '{field}' string field", file=path, line=lineno)
            yield value
