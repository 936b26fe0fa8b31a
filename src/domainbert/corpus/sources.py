"""Reading corpus sources: local files and globs in several formats, and streamed Hugging Face datasets.

``iter_source(source, malformed)`` yields plain document dicts ``{"id", "text", "source", "meta"}`` one at a
time, so memory does not grow with the input. Local formats: JSONL, JSON (an array, or an object with a
``data`` array; loaded whole, so keep such files small), plain text (one document per line, or documents
separated by blank lines), CSV/TSV and Parquet; any of the text formats may be compressed with gzip, bz2, xz
or zstd (detected from the magic bytes, not the file name). Every document keeps its source name and gets a
stable id: its own ``id_field`` value when present, else ``<source>:<position in the source>``.

Malformed input (a line that is not JSON, a missing text field, bytes that are not UTF-8) is skipped and
counted by ``MalformedCounter`` up to ``max_malformed_lines`` in total, then it is a ``DataError`` naming the
file and line. A corrupt compressed stream and a glob that matches nothing are always errors. Memory is
bounded whatever one input looks like: a line (or text block) longer than ``max_document_bytes`` is read past
in 1 MB pieces, never held whole, and skipped with a warning, counted as ``over_max_document_bytes`` (not
against ``max_malformed_lines``: it is well-formed, only too large); CSV fields have the same cap, and a JSON
array file (loaded whole) may be at most ``MAX_JSON_FILE_BYTES``.
This module does no cleaning: see ``filters``.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import logging
import lzma
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from domainbert.config.corpus import HFSource, LocalSource, SourceConfig
from domainbert.core.errors import DataError
from domainbert.core.files import COMPRESSION_SUFFIXES, open_binary
from domainbert.core.fingerprints import file_identity, portable

logger = logging.getLogger(__name__)

OVERSIZE = "over_max_document_bytes"
MAX_JSON_FILE_BYTES = 1 << 30
_PIECE = 1 << 20


class MalformedCounter:
    """Counts skipped lines across all sources (raising once the malformed allowance is used up) and holds
    the reader's cap on one document's size."""

    def __init__(self, limit: int, max_document_bytes: int = 16 << 20) -> None:
        self.limit = limit
        self.max_document_bytes = max_document_bytes
        self.total = 0
        self.by_source: dict[str, dict[str, int]] = {}

    def oversize(self, source: str, file: str | Path, line: int | None) -> None:
        """Record one document skipped for its size (warned, never an error)."""
        logger.warning(
            "%s:%s: document over corpus.max_document_bytes=%d skipped (source %r)",
            file,
            line,
            self.max_document_bytes,
            source,
        )
        counts = self.by_source.setdefault(source, {})
        counts[OVERSIZE] = counts.get(OVERSIZE, 0) + 1

    def skip(self, source: str, reason: str, file: str | Path, line: int | None) -> None:
        """Record one skipped line, or raise ``DataError`` when more than ``limit`` were skipped."""
        self.total += 1
        if self.total > self.limit:
            raise DataError(
                f"{reason} (source {source!r}; {self.total} malformed lines exceed "
                f"corpus.max_malformed_lines={self.limit})",
                file=file,
                line=line,
            )
        counts = self.by_source.setdefault(source, {})
        counts[reason] = counts.get(reason, 0) + 1


def expand_paths(source: LocalSource) -> list[Path]:
    """Expand the source's files and globs in a stable (sorted) order; a glob matching nothing is an error."""
    out: list[Path] = []
    for pattern in source.paths:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if Path(m).is_file()]
        if not matches:
            raise DataError(f"source {source.name!r}: no file matches", file=pattern)
        out.extend(Path(m) for m in matches)
    return out


def detect_format(path: Path, declared: str) -> str:
    """The declared format, or for ``auto`` the one the file name says (compression suffix ignored)."""
    if declared != "auto":
        return declared
    name = path.name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for ext, fmt in (
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "json"),
        (".csv", "csv"),
        (".tsv", "tsv"),
        (".parquet", "parquet"),
        (".txt", "text_lines"),
    ):
        if name.endswith(ext):
            return fmt
    raise DataError("cannot tell the format from the file name; set 'format:' on the source", file=path)


_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


def _lines(path: Path, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """Numbered raw lines of a (possibly compressed) file, ``None`` for a line over ``max_bytes`` (read past in
    pieces, never held whole); a corrupt stream is a DataError naming the line."""
    lineno = 0
    try:
        with open_binary(path) as f:
            while raw := f.readline(max_bytes + 1):
                lineno += 1
                if len(raw) <= max_bytes or raw.endswith(b"\n") and len(raw) == max_bytes + 1:
                    yield lineno, raw
                    continue
                while not raw.endswith(b"\n") and (raw := f.readline(_PIECE)):
                    pass
                yield lineno, None
    except _READ_ERRORS as exc:
        raise DataError(
            f"cannot read (corrupt or truncated compressed data?): {exc}", file=path, line=lineno + 1
        ) from None


def _whole_file(path: Path) -> bytes:
    """A JSON array file's bytes, at most ``MAX_JSON_FILE_BYTES`` (read with that cap, so never more)."""
    try:
        with open_binary(path) as f:
            data = f.read(MAX_JSON_FILE_BYTES + 1)
    except _READ_ERRORS as exc:
        raise DataError(f"cannot read (corrupt or truncated compressed data?): {exc}", file=path) from None
    if len(data) > MAX_JSON_FILE_BYTES:
        raise DataError(
            f"a JSON array source is loaded whole and this one is over {MAX_JSON_FILE_BYTES} bytes; "
            "write it as JSONL (one document per line)",
            file=path,
        )
    return data


def _parquet_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        row = 0
        for batch in parquet.iter_batches(batch_size=1000):
            for rec in batch.to_pylist():
                row += 1
                yield row, rec
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read Parquet file: {exc}", file=path) from None


def _json_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a JSON array file (or of its ``data`` array), read whole with a size cap."""
    text = _whole_file(path)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"not a valid JSON document: {exc}", file=path) from None
    items = data.get("data") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise DataError("a JSON source must be an array of objects or an object with a 'data' array", file=path)
    yield from ((i, rec) for i, rec in enumerate(items, start=1) if isinstance(rec, dict))


def _records(path: Path, fmt: str, source: str, malformed: MalformedCounter) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record dict) for each document of one file."""
    if fmt == "parquet":
        yield from _parquet_records(path)
        return
    if fmt == "json":
        yield from _json_records(path)
        return
    decoded = _decoded_lines(path, source, malformed)
    if fmt == "jsonl":
        for lineno, line in decoded:
            if not line.strip():
                continue
            try:
                rec = _loads(line)
            except json.JSONDecodeError:
                malformed.skip(source, "invalid_json", path, lineno)
                continue
            if not isinstance(rec, dict):
                malformed.skip(source, "not_an_object", path, lineno)
                continue
            yield lineno, rec
    elif fmt == "text_lines":
        for lineno, line in decoded:
            if line.strip():
                yield lineno, {"text": line.rstrip("\r\n")}
    elif fmt == "text_blocks":
        yield from _blocks(decoded, path, source, malformed)
    elif fmt in ("csv", "tsv"):
        # csv needs text with universal newlines; records may span lines, so the row number is reported.
        stream = io.TextIOWrapper(open_binary(path), encoding="utf-8", newline="")
        csv.field_size_limit(malformed.max_document_bytes)
        try:
            reader = csv.DictReader(stream, delimiter="\t" if fmt == "tsv" else ",")
            for row, rec in enumerate(reader, start=2):
                yield row, rec
        except UnicodeDecodeError as exc:
            raise DataError(f"not UTF-8: {exc}", file=path) from None
        except (csv.Error, *_READ_ERRORS) as exc:
            raise DataError(f"cannot read {fmt.upper()}: {exc}", file=path) from None
        finally:
            stream.close()
    else:  # pragma: no cover - the config Literal rules this out
        raise DataError(f"unknown format {fmt!r}", file=path)


def _blocks(
    decoded: Iterator[tuple[int, str]], path: Path, source: str, malformed: MalformedCounter
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Blank-line separated blocks; one growing past ``max_document_bytes`` is dropped (and counted) as it
    grows, so it is never held whole."""
    block: list[str] = []
    start, size, over = 0, 0, False
    for lineno, line in decoded:
        if line.strip():
            start = start or lineno
            size += len(line)
            if size > malformed.max_document_bytes and not over:
                over, block = True, []
            if not over:
                block.append(line.rstrip("\r\n"))
            continue
        if over:
            malformed.oversize(source, path, start)
        elif block:
            yield start, {"text": "\n".join(block)}
        block, start, size, over = [], 0, 0, False
    if over:
        malformed.oversize(source, path, start)
    elif block:
        yield start, {"text": "\n".join(block)}


def _loads(line: str) -> Any:
    """``json.loads``, through orjson (a prefect dependency, several times faster) when it can parse the line;
    what orjson refuses but Python accepts (NaN, integers over 64 bits) goes to ``json.loads``."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _decoded_lines(path: Path, source: str, malformed: MalformedCounter) -> Iterator[tuple[int, str]]:
    for lineno, raw in _lines(path, malformed.max_document_bytes):
        if raw is None:
            malformed.oversize(source, path, lineno)
            continue
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError:
            malformed.skip(source, "not_utf8", path, lineno)


def _text_of(rec: dict[str, Any], field: str, template: str | None) -> str | None:
    if template is not None:
        try:
            return template.format(**{k: ("" if v is None else v) for k, v in rec.items()})
        except (KeyError, IndexError, ValueError):
            return None
    value = rec.get(field)
    return value if isinstance(value, str) else None


def _meta_of(rec: dict[str, Any], used: set[str]) -> dict[str, Any]:
    meta = rec.get("meta")
    if isinstance(meta, dict):
        return meta
    return {k: v for k, v in rec.items() if k not in used and isinstance(v, (str, int, float, bool))}


def iter_source(source: SourceConfig, malformed: MalformedCounter) -> Iterator[dict[str, Any]]:
    """Stream the documents of one source as ``{"id", "text", "source", "meta"}`` dicts, at most ``max_documents``.

    Args:
        source: a local or Hugging Face source from the domain YAML.
        malformed: the shared counter of skipped malformed lines.

    Raises:
        DataError: a glob matching nothing, a corrupt file, or more malformed lines than allowed.
    """
    records = _iter_hf(source) if isinstance(source, HFSource) else _iter_local(source, malformed)
    yield from documents_of(source, records, malformed, start=0, limit=source.max_documents)


def documents_of(
    source: SourceConfig,
    records: Iterator[tuple[tuple[Path | str, int], dict[str, Any]]],
    malformed: MalformedCounter,
    start: int,
    limit: int | None,
) -> Iterator[dict[str, Any]]:
    """Document dicts from ``(where, record)`` pairs; positional ids count from ``start``; at most ``limit``."""
    used = {source.text_field, source.id_field or "", "meta"}
    position = start
    if limit is not None and limit <= 0:
        return
    for where, rec in records:
        text = _text_of(rec, source.text_field, source.text_template)
        if text is None:  # no such text field, or a text_template field missing
            malformed.skip(source.name, "missing_text", where[0], where[1])
            continue
        own_id = rec.get(source.id_field) if source.id_field else None
        doc_id = str(own_id) if own_id not in (None, "") else f"{source.name}:{position}"
        yield {"id": doc_id, "text": text, "source": source.name, "meta": _meta_of(rec, used)}
        position += 1
        if limit is not None and position - start >= limit:
            return


def _iter_local(source: LocalSource, malformed: MalformedCounter) -> Iterator[tuple[tuple[Path, int], dict[str, Any]]]:
    for path in expand_paths(source):
        fmt = detect_format(path, source.format)
        for lineno, rec in _records(path, fmt, source.name, malformed):
            yield (path, lineno), rec


def _iter_hf(source: HFSource) -> Iterator[tuple[tuple[str, int], dict[str, Any]]]:
    """Stream a hub dataset (no full download); needs the network, so it is not exercised by the tests."""
    import datasets

    try:
        stream = datasets.load_dataset(source.dataset, source.config_name, split=source.split, streaming=True)
    except Exception as exc:  # noqa: BLE001 - the hub raises many types; the user needs the message
        raise DataError(f"cannot stream Hugging Face dataset: {exc}", file=f"hf://{source.dataset}") from None
    for i, rec in enumerate(stream):
        yield (f"hf://{source.dataset}", i), rec


def input_fingerprint(sources: list[SourceConfig]) -> dict[str, str]:
    """Identity of the inputs for the stage fingerprint: each local file's content hash (cached per machine),
    hub sources by name."""
    out: dict[str, str] = {}
    for source in sources:
        if isinstance(source, HFSource):
            out[source.name] = f"hf://{source.dataset}/{source.config_name}/{source.split}"
            continue
        for path in expand_paths(source):
            out[f"{source.name}:{portable(str(path))}"] = file_identity(path)
    return out
