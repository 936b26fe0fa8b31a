"""Reading and writing corpus shards: the format every later stage reads the corpus in.

A built corpus folder holds ``train/`` and ``validation/`` sub-folders of Parquet shards named
``shard-00000.parquet``, ... with the columns ``id`` (str), ``text`` (str), ``source`` (str) and
``meta`` (str, JSON). Readers stream one row group at a time, so memory does not grow with the corpus.
This module does no cleaning or deduplication; ``domainbert.corpus.build`` does that.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from domainbert.core.errors import DataError

SPLITS = ("train", "validation")
SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("meta", pa.string())])


def shard_paths(corpus_dir: Path, split: str) -> list[Path]:
    """The shards of one split, in order; an empty or missing split is an error naming the folder."""
    folder = Path(corpus_dir) / split
    paths = sorted(folder.glob("shard-*.parquet"))
    if not paths:
        raise DataError(
            f"no shards for split {split!r} (build the corpus first: domainbert corpus DOMAIN)", file=folder
        )
    return paths


def write_shard(path: Path, records: Iterable[dict[str, Any]], row_group_size: int = 1000) -> int:
    """Write records (``id``, ``text``, ``source``, ``meta``) to one Parquet shard; returns the row count.

    Written deterministically (no timestamps in the file), so equal inputs give byte-identical shards.
    """
    return write_table(path, records_table(records), row_group_size)


def records_table(records: Iterable[dict[str, Any]]) -> pa.Table:
    """Document dicts as an Arrow table with the shard schema (``meta`` dicts become JSON strings)."""
    records = list(records)
    columns = {
        "id": [str(r["id"]) for r in records],
        "text": [r["text"] for r in records],
        "source": [r.get("source", "") for r in records],
        "meta": [r["meta"] if isinstance(r.get("meta"), str) else _dump_meta(r.get("meta")) for r in records],
    }
    return pa.table(columns, schema=SCHEMA)


def write_work_table(path: Path, table: pa.Table) -> None:
    """Write an intermediate table (a build's work folder) as an uncompressed Arrow IPC file.

    Work files are read once by the next step and deleted with the work folder, so they skip Parquet's
    encoding and compression; ``read_work_table`` memory-maps them back. Written to ``path`` + ``.tmp``
    and renamed, so a file under its final name is whole.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        writer.write_table(table.select(SCHEMA.names).cast(SCHEMA))
    tmp.replace(path)


def read_work_table(path: Path) -> pa.Table:
    """Read a table written by ``write_work_table``."""
    with pa.memory_map(str(path), "r") as source:
        return pa.ipc.open_file(source).read_all()


def write_table(path: Path, table: pa.Table, row_group_size: int = 1000) -> int:
    """Write an Arrow table with the shard schema, as ``write_shard`` does (deterministic bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.select(SCHEMA.names).cast(SCHEMA), path, row_group_size=row_group_size, compression="zstd")
    return table.num_rows


def _dump_meta(meta: object) -> str:
    if not meta:
        return "{}"
    import json

    return json.dumps(meta, sort_keys=True, ensure_ascii=False)


def iter_documents(
    corpus_dir: Path, split: str = "train", columns: list[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Stream documents of a split as dicts, one Parquet row group at a time."""
    for path in shard_paths(corpus_dir, split):
        parquet = pq.ParquetFile(path)
        for i in range(parquet.num_row_groups):
            yield from parquet.read_row_group(i, columns=columns).to_pylist()


def iter_texts(corpus_dir: Path, split: str = "train") -> Iterator[str]:
    """Stream the texts of a split."""
    for row in iter_documents(corpus_dir, split, columns=["text"]):
        yield row["text"]


def count_documents(corpus_dir: Path, split: str = "train") -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in shard_paths(corpus_dir, split))
