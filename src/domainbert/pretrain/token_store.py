"""Token ids stored with the corpus: each document of a split tokenized once, then read from memory-mapped arrays.

Tokenizing is nearly all of the text stream's time (bench/results/gpu_check_h200_2026-11.md: the Rust tokenizer, one
core, 0.4-0.7M tokens/s), and a run reads the same documents every epoch and every arm with the same
tokenizer. ``ensure_token_store`` tokenizes a split once into this machine's cache
(``machine_cache()/token-ids/<fingerprint>``: the split's shards by content and the tokenizer's own
serialisation, never a path, so every run folder and arm with the same corpus and tokenizer shares it; an
extended-vocabulary or from-scratch arm's tokenizer has its own). The folder is written through
``atomic_output`` (complete or absent, with its record), under a file lock so that ranks or runs that start
together tokenize it once:

- ``ids.npy``: every document's token ids (no special tokens), in file order (shard, row group, row); uint16
  when the vocabulary fits, else uint32;
- ``word_starts.npy``: the per-token word-start flags ``data.encode_block`` derives from ``word_ids()``;
- ``offsets.npy``: int64, document ``i``'s tokens are ``ids[offsets[i]:offsets[i + 1]]``;
- ``index.json``: the rows of each shard's row groups, and the one-off cost (seconds, MB/s of text).

``StoredReader`` hands out the blocks ``data.TokenStream`` packs, the same arrays ``encode_block`` returns for
the same documents in the same order (``StoredCursor`` permutes shards, row groups and rows exactly as
``data.DocumentCursor`` does), so the batches, the stream's state and resumption are those of the text path.
A slow (Python) tokenizer is not stored: its stream tokenizes as before. This module neither packs nor masks.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from domainbert import __version__
from domainbert.core.artifacts import atomic_output, fingerprint, is_complete
from domainbert.core.errors import DataError
from domainbert.core.fingerprints import file_identity
from domainbert.core.paths import machine_cache
from domainbert.corpus import store
from domainbert.pretrain.data import BLOCK_DOCS, CursorState, DocumentCursor, _plain_backend, encode_block

log = logging.getLogger(__name__)

NAME = "token-ids"
FORMAT = 1  # bump when what is stored changes (encode_block's ids or word starts)
CHUNK_DOCS = 512  # documents per encode_batch call while building: the calls are independent of the block size
BUILD_THREADS = 2  # the Rust tokenizer releases the GIL: two calls at once use two cores


def tokenizer_identity(tokenizer: Any) -> str | None:
    """sha256 of the fast tokenizer's full serialisation (normalizer, pre-tokenizer, model, added tokens), set
    to neither truncate nor pad; None for a slow tokenizer."""
    backend = _plain_backend(tokenizer)
    return None if backend is None else hashlib.sha256(backend.to_str().encode()).hexdigest()


def store_fingerprint(tokenizer: Any, corpus_dir: Path, split: str) -> str | None:
    """The stored split's cache key: its shards' contents and the tokenizer's identity (None: not storable)."""
    identity = tokenizer_identity(tokenizer)
    if identity is None:
        return None
    shards = [file_identity(p) for p in store.shard_paths(Path(corpus_dir), split)]
    return fingerprint(
        {"kind": NAME, "format": FORMAT, "split": split}, {"shards": shards, "tokenizer": identity}, __version__
    )


def cache_folder(fp: str) -> Path:
    """Where this machine keeps the stored split with fingerprint ``fp``."""
    return machine_cache() / NAME / fp[:24]


@contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """Held while a stored split is checked and built: a second process waits, then finds it complete."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f"{folder.name}.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _unreadable(path: Path, exc: Exception) -> DataError:
    """The text cursor's error for a shard it cannot read (``data.DocumentCursor``), with the same words."""
    return DataError(
        f"cannot read corpus shard (truncated or corrupt; delete the corpus folder to rebuild it): "
        f"{str(exc).splitlines()[0]}",
        file=path,
    )


def build(tokenizer: Any, corpus_dir: Path, split: str, out: Path, threads: int = BUILD_THREADS) -> dict[str, Any]:
    """Tokenize every document of ``split`` into ``out`` (the files above); returns ``index.json``'s content."""
    backend = copy.deepcopy(_plain_backend(tokenizer))  # the threads' own: the wrapper may set truncation
    dtype = np.uint16 if backend.get_vocab_size(with_added_tokens=True) <= 2**16 else np.uint32
    ids_parts: list[np.ndarray] = []
    start_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    shards: list[list[int]] = []
    text_bytes, began = 0, time.perf_counter()

    def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids, starts, lengths = encode_block(tokenizer, texts, backend)
        if len(ids) and int(ids.max()) > np.iinfo(dtype).max:
            raise DataError(f"token id {int(ids.max())} does not fit {np.dtype(dtype).name}", file=out)
        return ids.astype(dtype), starts, lengths

    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="domainbert-store") as pool:
        for path in store.shard_paths(Path(corpus_dir), split):
            sizes, chunks = [], []
            try:
                parquet = pq.ParquetFile(path)
                columns = [
                    parquet.read_row_group(g, columns=["text"]).column("text").combine_chunks()
                    for g in range(parquet.num_row_groups)
                ]
            except (OSError, pa.ArrowException) as exc:
                raise _unreadable(path, exc) from None
            for column in columns:
                sizes.append(len(column))
                text_bytes += int(pc.sum(pc.binary_length(column)).as_py() or 0)
                texts = column.to_pylist()
                chunks += [texts[i : i + CHUNK_DOCS] for i in range(0, len(texts), CHUNK_DOCS)]
            for ids, starts, lengths in pool.map(encode, chunks):
                ids_parts.append(ids)
                start_parts.append(starts)
                length_parts.append(lengths)
            shards.append(sizes)
    lengths = np.concatenate(length_parts) if length_parts else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(out / "ids.npy", np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=dtype))
    np.save(out / "word_starts.npy", np.concatenate(start_parts) if start_parts else np.zeros(0, dtype=bool))
    np.save(out / "offsets.npy", offsets)
    seconds = time.perf_counter() - began
    index = {
        "split": split,
        "row_groups": shards,
        "documents": len(lengths),
        "tokens": int(offsets[-1]),
        "dtype": np.dtype(dtype).name,
        "text_bytes": text_bytes,
        "build_seconds": round(seconds, 3),
        "text_mb_per_s": round(text_bytes / 1e6 / seconds, 2) if seconds > 0 else None,
        "tokens_per_s": round(int(offsets[-1]) / seconds, 1) if seconds > 0 else None,
    }
    (out / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return index


class TokenStore:
    """A stored split, memory-mapped: the documents' ids and word starts, gathered a block at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.index = json.loads((self.folder / "index.json").read_text())
        self.ids = np.load(self.folder / "ids.npy", mmap_mode="r")
        self.word_starts = np.load(self.folder / "word_starts.npy", mmap_mode="r")
        self.offsets = np.load(self.folder / "offsets.npy")
        self.row_groups: list[list[int]] = self.index["row_groups"]
        # The number of each row group's first document.
        firsts = np.cumsum([0] + [n for shard in self.row_groups for n in shard])
        self.first_document: list[list[int]] = []
        k = 0
        for shard in self.row_groups:
            self.first_document.append([int(firsts[k + g]) for g in range(len(shard))])
            k += len(shard)

    def gather(self, documents: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Token ids (int64), word starts and token counts of ``documents`` concatenated, as ``encode_block``."""
        begins = self.offsets[documents]
        lengths = self.offsets[documents + 1] - begins
        total = int(lengths.sum())
        # Position of each output token in the stored arrays: its document's start plus its place within it.
        shift = np.repeat(begins - (np.cumsum(lengths) - lengths), lengths)
        positions = shift + np.arange(total, dtype=np.int64)
        return self.ids[positions].astype(np.int64), self.word_starts[positions], lengths


class StoredCursor(DocumentCursor):
    """``DocumentCursor``'s order and position over a stored split: blocks of document numbers, not texts.

    The permutations are the parent's (``_order``), drawn from the same row counts, so a block holds the same
    documents as the text cursor's block at the same position.
    """

    def __init__(self, token_store: TokenStore, corpus_dir: Path, split: str, shuffle_seed: int | None) -> None:
        super().__init__(corpus_dir, split, shuffle_seed=shuffle_seed)
        self.store = token_store
        if len(self.paths) != len(token_store.row_groups):
            raise DataError("the stored token ids do not match the corpus split's shards", file=token_store.folder)

    def _row_group(self, shard: int, group: int) -> list[Any] | None:
        if shard >= len(self.paths):
            return None
        epoch = self.state.epoch
        key = (epoch, shard, group)
        if self._cache_key != key:
            real_shard = self._order(len(self.paths), epoch)[shard]
            sizes = self.store.row_groups[real_shard]
            if group >= len(sizes):
                return None
            real_group = self._order(len(sizes), epoch, shard)[group]
            first = self.store.first_document[real_shard][real_group]
            self._cache = [first + i for i in self._order(sizes[real_group], epoch, shard, real_group)]
            self._cache_key = key
        return self._cache


class StoredReader:
    """``read_ahead.BlockReader``'s interface over a stored split: nothing to tokenize, nothing read ahead."""

    def __init__(self, cursor: StoredCursor) -> None:
        self.cursor = cursor

    def next_block(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.cursor.store.gather(np.asarray(self.cursor.read_block(BLOCK_DOCS), dtype=np.int64))

    def position(self) -> CursorState:
        return self.cursor.state

    def seek(self, position: CursorState) -> None:
        self.cursor.state = position

    def close(self) -> None:
        pass


def ensure_token_store(tokenizer: Any, corpus_dir: Path, split: str = "train") -> TokenStore | None:
    """The stored split for ``tokenizer``, tokenized now if this machine has none; None for a slow tokenizer."""
    fp = store_fingerprint(tokenizer, corpus_dir, split)
    if fp is None:
        return None
    folder = cache_folder(fp)
    with _build_lock(folder):
        if not is_complete(folder, fp):
            config = {"kind": NAME, "format": FORMAT, "split": split, "corpus": str(corpus_dir)}
            with atomic_output(folder, config=config, fp=fp) as tmp:
                index = build(tokenizer, corpus_dir, split, tmp)
            log.info(
                "tokenized the %s split once: %d documents, %d tokens in %.1f s (%s MB/s of text), stored in %s",
                split,
                index["documents"],
                index["tokens"],
                index["build_seconds"],
                index["text_mb_per_s"],
                folder,
            )
    return TokenStore(folder)


def stored_reader(
    tokenizer: Any, corpus_dir: Path, split: str = "train", shuffle_seed: int | None = None
) -> StoredReader | None:
    """A ``StoredReader`` for ``data.TokenStream(blocks=...)``, or None where the tokenizer is slow or the cache
    cannot be written (full, read-only): the stream then tokenizes as it goes, the same batches, slower."""
    try:
        token_store = ensure_token_store(tokenizer, corpus_dir, split)
    except OSError as exc:
        log.warning("cannot store the token ids (%s): tokenizing while training instead", exc)
        return None
    if token_store is None:
        return None
    return StoredReader(StoredCursor(token_store, corpus_dir, split, shuffle_seed))
