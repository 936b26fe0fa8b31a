"""The documents of a source as Arrow tables (the shard schema), with a fast path for plain JSONL files.

``iter_source_tables(source, malformed)`` yields tables of ``id``, ``text``, ``source``, ``meta`` holding the
same documents, in the same order and with the same ids, as ``sources.iter_source``. A JSONL file (plain or
compressed) whose records hold only the text field and the id field is parsed by Arrow's streaming JSON
reader, block by block in C++ (about 30 times faster than a Python ``json.loads`` per line). Anything
else goes through ``iter_source``'s Python readers: other formats, a text template, Hugging Face sources,
records with more fields (their ``meta``), and any file the fast path stops on - a line that is not JSON, a
record without the text field, an id that changes type. In that case the Python reader takes over the file
after the documents already produced, and it is what names the bad file and line and counts the skip.
A line longer than a block stops Arrow (it never buffers past one), so the Python reader reads past it in
pieces. Memory stays at a block (1 MB) plus one chunk of documents, or one document of at most
``corpus.max_document_bytes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from domainbert.config.corpus import LocalSource, SourceConfig
from domainbert.core.files import open_binary
from domainbert.corpus.sources import (
    MalformedCounter,
    _records,
    detect_format,
    documents_of,
    expand_paths,
    iter_source,
)
from domainbert.corpus.store import SCHEMA, records_table

CHUNK = 2000  # documents per table from the Python readers
BLOCK_BYTES = 1 << 20


class _NotPlain(Exception):
    """The file (or its next block) is not plain id + text JSONL: the Python reader takes over."""


def iter_source_tables(source: SourceConfig, malformed: MalformedCounter) -> Iterator[pa.Table]:
    """The source's documents as tables with the shard schema, at most ``max_documents`` in all.

    Raises:
        DataError: as ``iter_source`` (a glob matching nothing, a corrupt file, too many malformed lines).
    """
    if not isinstance(source, LocalSource) or source.text_template is not None:
        yield from _chunks(iter_source(source, malformed))
        return
    count, limit = 0, source.max_documents
    for path in expand_paths(source):
        if detect_format(path, source.format) == "jsonl":
            parts = _jsonl_tables(path, source, malformed, count, _left(limit, count))
        else:
            records = (
                ((path, line), rec)
                for line, rec in _records(path, detect_format(path, source.format), source.name, malformed)
            )
            parts = _chunks(documents_of(source, records, malformed, count, _left(limit, count)))
        for table in parts:
            if limit is not None and count + table.num_rows > limit:
                table = table.slice(0, limit - count)
            count += table.num_rows
            if table.num_rows:
                yield table
            if limit is not None and count >= limit:
                return


def _left(limit: int | None, count: int) -> int | None:
    return None if limit is None else limit - count


def _chunks(docs: Iterator[dict[str, Any]]) -> Iterator[pa.Table]:
    while batch := list(islice(docs, CHUNK)):
        yield records_table(batch)


def _jsonl_tables(
    path: Path, source: LocalSource, malformed: MalformedCounter, start: int, limit: int | None
) -> Iterator[pa.Table]:
    """One JSONL file through Arrow; on anything it cannot take, the Python reader after the rows done."""
    done = 0
    try:
        with open_binary(path) as stream:
            reader = pj.open_json(stream, read_options=pj.ReadOptions(block_size=BLOCK_BYTES))
            for batch in reader:
                table = _documents_table(batch, source, start + done, malformed.max_document_bytes)
                done += table.num_rows
                yield table
                if limit is not None and done >= limit:
                    return
    except (_NotPlain, pa.ArrowException, OSError, EOFError, ValueError):
        pass
    else:
        return
    records = (((path, line), rec) for line, rec in _records(path, "jsonl", source.name, malformed))
    docs = documents_of(source, records, malformed, start, limit)
    for _ in islice(docs, done):  # produced by Arrow already
        pass
    yield from _chunks(docs)


def _documents_table(batch: pa.RecordBatch, source: LocalSource, start: int, max_bytes: int) -> pa.Table:
    """A parsed block as documents, or ``_NotPlain`` when the Python reader would treat it differently."""
    names = set(batch.schema.names)
    if not names <= {source.text_field, source.id_field} or source.text_field not in names:
        raise _NotPlain
    text = batch.column(source.text_field)
    if not pa.types.is_string(text.type) or text.null_count:
        raise _NotPlain
    try:
        # Arrow's JSON reader does not check UTF-8; the Python reader skips (and counts) such lines.
        batch.validate(full=True)
    except pa.ArrowInvalid:
        raise _NotPlain from None
    if len(text) and pc.max(pc.binary_length(text)).as_py() > max_bytes // 2:
        # Near the size cap the Python reader decides (on the raw line, escapes included) and counts the skip.
        raise _NotPlain
    n = batch.num_rows
    if source.id_field in names:
        ids = batch.column(source.id_field)
        if pa.types.is_integer(ids.type):
            ids = pc.cast(ids, pa.string())  # str(int) in the Python reader
        elif not pa.types.is_string(ids.type) and not pa.types.is_null(ids.type):
            raise _NotPlain
        missing = pc.fill_null(pc.equal(ids, ""), True) if not pa.types.is_null(ids.type) else None
        if missing is None or pc.any(missing).as_py():
            present = ids.to_pylist() if missing is not None else [None] * n
            ids = pa.array(
                [i if i not in (None, "") else f"{source.name}:{start + k}" for k, i in enumerate(present)],
                type=pa.string(),
            )
    else:
        ids = pa.array([f"{source.name}:{start + k}" for k in range(n)], type=pa.string())
    return pa.table(
        [ids, text, pa.repeat(source.name, n).cast(pa.string()), pa.repeat("{}", n).cast(pa.string())], schema=SCHEMA
    )
