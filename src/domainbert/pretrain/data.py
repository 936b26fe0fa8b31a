"""The training token stream: corpus shards -> tokenized documents -> packed fixed-length sequences.

Packing (the default) concatenates documents, each followed by [SEP], and cuts the stream into sequences of
exactly the current length, each starting with [CLS]: no padding, so every position is a real token. Without
packing each document becomes one sequence ([CLS] doc [SEP], truncated, padded), the ``run_mlm.py``
line-by-line recipe, and the real-token fraction drops below 1.
The stream is resumable: its state (epoch, shard, row group, row and the not-yet-used token buffer) is saved
in every checkpoint and a restarted run seeks straight to it (Parquet row groups are skipped unread), so the
data is never replayed from the start. When the corpus runs out the stream starts a new epoch.
Per-token ``word_start`` flags come from the fast tokenizer's ``word_ids()`` for whole-word masking.
A block of documents is read from the Rust encodings into arrays in one pass and packed rows are cut from the
buffer in one reshape: nearly all of the stream's time is the tokenizer's own (bench/results/gpu_check_h200_2026-11.md),
so a training run reads the same blocks from the split's stored token ids instead (``token_store.py``,
``blocks``): tokenized once per corpus and tokenizer, the same sequences and state.
This module does not mask; ``masking.py`` does.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from domainbert.core.errors import DataError
from domainbert.core.jsonl import iter_texts
from domainbert.corpus import store
from domainbert.pretrain.read_ahead import BlockReader, BlockSource

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

BLOCK_DOCS = 64  # documents tokenized per call: large enough for the fast tokenizer's batching, small state


def _plain_backend(tokenizer: PreTrainedTokenizerBase) -> Any:
    """The fast tokenizer's Rust tokenizer set to neither truncate nor pad, or None for a slow tokenizer.

    The Hugging Face wrapper converts every encoding into Python lists and dicts before ``encode_block`` turns
    them into arrays again; reading the Rust encodings directly gives the same ids and words for less. The
    wrapper itself sets truncation and padding afresh before each of its calls, so clearing them here leaves
    its own results unchanged.
    """
    if not getattr(tokenizer, "is_fast", False):
        return None
    backend = tokenizer.backend_tokenizer
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    return backend


def encode_block(
    tokenizer: PreTrainedTokenizerBase, texts: list[str], backend: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids, word-start flags and token counts of ``texts`` (no special tokens), concatenated.

    A token starts a word when it is a document's first, has no word (an added special token) or belongs to
    another word than the token before it (``word_ids()``). ``backend``: the Rust tokenizer to encode with
    (default: the tokenizer's own, ``_plain_backend``).
    """
    backend = backend if backend is not None else _plain_backend(tokenizer)
    if backend is not None:
        encodings = backend.encode_batch(texts, add_special_tokens=False)
        id_lists = [e.ids for e in encodings]
        word_lists = [e.word_ids for e in encodings]
    else:  # a slow tokenizer: the wrapper's own output
        # verbose=False: a document longer than the model's maximum is expected here, packing cuts it into
        # sequences; transformers' "will result in indexing errors" warning would only alarm.
        enc = tokenizer(
            texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False, verbose=False
        )
        id_lists = list(enc["input_ids"])
        word_lists = [enc.word_ids(i) for i in range(len(id_lists))]
    lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
    total = int(lengths.sum())
    ids = np.fromiter(chain.from_iterable(id_lists), dtype=np.int64, count=total)
    # None (no word) becomes NaN, which differs from every value, itself included: such a token starts a word.
    words = np.array(list(chain.from_iterable(word_lists)), dtype=np.float64)
    starts = np.ones(total, dtype=bool)
    if total > 1:
        starts[1:] = words[1:] != words[:-1]
    starts[np.cumsum(lengths)[:-1][lengths[1:] > 0]] = True  # each document's first token
    return ids, starts, lengths


def encode_documents(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Token ids and word-start flags of each text (no special tokens)."""
    if not texts:
        return []
    return split_documents(*encode_block(tokenizer, texts))


def split_documents(ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The documents of ``encode_block`` one by one."""
    cuts = np.cumsum(lengths)[:-1]
    return list(zip(np.split(ids, cuts), np.split(starts, cuts), strict=True))


def with_separators(
    ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, sep_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """The documents of ``encode_block`` each followed by ``sep_id`` (a word start), as one stream."""
    ends = np.cumsum(lengths + 1) - 1  # where each document's [SEP] lands
    is_sep = np.zeros(len(ids) + len(lengths), dtype=bool)
    is_sep[ends] = True
    out_ids = np.empty(len(is_sep), dtype=np.int64)
    out_ids[is_sep], out_ids[~is_sep] = sep_id, ids
    out_starts = np.ones(len(is_sep), dtype=bool)
    out_starts[~is_sep] = starts
    return out_ids, out_starts


@dataclass
class CursorState:
    """Position of the next unread document."""

    epoch: int = 0
    shard: int = 0
    row_group: int = 0
    row: int = 0


class DocumentCursor:
    """Reads blocks of documents from a corpus split, resuming at a saved position."""

    def __init__(
        self, corpus_dir: Path, split: str = "train", state: CursorState | None = None, shuffle_seed: int | None = None
    ) -> None:
        self.paths = store.shard_paths(Path(corpus_dir), split)
        self.state = state or CursorState()
        self.shuffle_seed = shuffle_seed
        self._cache_key: tuple[int, int, int] | None = None
        self._cache: list[Any] = []  # the row group's texts (a stored cursor's: document numbers)

    def _order(self, n: int, *key: int) -> list[int]:
        """A permutation of ``range(n)`` fixed by the seed and ``key`` (identity without a seed).

        Corpora are often sorted (FOLDOC is alphabetical), and a budget smaller than the corpus would otherwise
        see only its first entries. Shard order, row-group order and rows within a row group are permuted per
        epoch from the seed alone, so the cursor position stays a plain (shard, row group, row) triple and a
        resumed run reads exactly what an uninterrupted one would.
        """
        if self.shuffle_seed is None:
            return list(range(n))
        return [int(i) for i in np.random.default_rng([self.shuffle_seed, *key]).permutation(n)]

    def _row_group(self, shard: int, group: int) -> list[Any] | None:
        if shard >= len(self.paths):
            return None
        epoch = self.state.epoch
        key = (epoch, shard, group)
        if self._cache_key != key:
            path = self.paths[self._order(len(self.paths), epoch)[shard]]
            try:
                parquet = pq.ParquetFile(path)
                if group >= parquet.num_row_groups:
                    return None
                real_group = self._order(parquet.num_row_groups, epoch, shard)[group]
                texts = parquet.read_row_group(real_group, columns=["text"]).column("text").to_pylist()
            except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
                raise DataError(
                    f"cannot read corpus shard (truncated or corrupt; delete the corpus folder to "
                    f"rebuild it): {str(exc).splitlines()[0]}",
                    file=path,
                ) from None
            self._cache = [texts[i] for i in self._order(len(texts), epoch, shard, real_group)]
            self._cache_key = key
        return self._cache

    def read_block(self, n: int = BLOCK_DOCS) -> list[Any]:
        """Up to ``n`` next documents (never empty: wraps to a new epoch at the end)."""
        wrapped = False
        while True:
            s = self.state
            texts = self._row_group(s.shard, s.row_group)
            if texts is None:
                if s.shard >= len(self.paths):
                    if wrapped:
                        raise DataError("the corpus split has no documents", file=self.paths[0].parent)
                    wrapped = True
                    self.state = CursorState(epoch=s.epoch + 1)
                else:
                    self.state = CursorState(s.epoch, s.shard + 1, 0, 0)
                continue
            if s.row >= len(texts):
                self.state = CursorState(s.epoch, s.shard, s.row_group + 1, 0)
                continue
            block = texts[s.row : s.row + n]
            self.state = CursorState(s.epoch, s.shard, s.row_group, s.row + len(block))
            return block


@dataclass
class Batch:
    input_ids: torch.Tensor  # (n, len) int64
    special: torch.Tensor  # (n, len) bool: never masked
    word_start: torch.Tensor  # (n, len) bool
    attention_mask: torch.Tensor | None  # None when every position is real (packed)
    real_tokens: int
    token_type_ids: torch.Tensor | None = None  # (n, len) int64 segment ids; sentence pairs only (pairs.py)
    next_sentence_label: torch.Tensor | None = None  # (n,) int64: 0 IsNext, 1 NotNext; sentence pairs only
    general_tokens: int = 0  # of ``real_tokens``, those replayed from general text (replay.py)


@dataclass
class TokenStream:
    """Packed (or one-document-per-sequence) sequences from a corpus split, with a resumable state.

    ``encode_workers`` threads tokenize the next blocks ahead (``read_ahead.BlockReader``; 0: none); the
    sequences are the same either way. ``blocks``: a reader of the split's stored token ids
    (``token_store.stored_reader``) in place of tokenizing: the same blocks, the same sequences and state.
    """

    tokenizer: Any
    corpus_dir: Path
    split: str = "train"
    packing: bool = True
    shuffle_seed: int | None = None
    encode_workers: int = 0
    blocks: BlockSource | None = None
    cursor: DocumentCursor = field(init=False)
    _ids: np.ndarray = field(init=False)
    _starts: np.ndarray = field(init=False)
    _docs: list[tuple[np.ndarray, np.ndarray]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self._reader: BlockSource
        if self.blocks is not None:
            self.cursor, self._reader = self.blocks.cursor, self.blocks
        else:
            self.cursor = DocumentCursor(self.corpus_dir, self.split, shuffle_seed=self.shuffle_seed)
            self._reader = BlockReader(self.tokenizer, self.cursor, encode_block, _plain_backend, self.encode_workers)
        self._ids = np.zeros(0, dtype=np.int64)
        self._starts = np.zeros(0, dtype=bool)
        self.cls_id = self.tokenizer.cls_token_id
        self.sep_id = self.tokenizer.sep_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def _refill(self) -> None:
        block = self._reader.next_block()
        if self.packing:
            ids, starts = with_separators(*block, self.sep_id)
            self._ids = np.concatenate([self._ids, ids])
            self._starts = np.concatenate([self._starts, starts])
        else:
            self._docs.extend(d for d in split_documents(*block) if len(d[0]))

    def next_sequences(self, n: int, length: int) -> Batch:
        """``n`` sequences of ``length`` tokens."""
        if self.packing:
            return self._packed(n, length)
        ids = np.full((n, length), self.pad_id, dtype=np.int64)
        starts = np.ones((n, length), dtype=bool)
        real = np.zeros((n, length), dtype=bool)
        for i in range(n):
            while not self._docs:
                self._refill()
            doc_ids, doc_starts = self._docs.pop(0)
            k = min(len(doc_ids), length - 2)
            ids[i, 0], ids[i, k + 1] = self.cls_id, self.sep_id
            ids[i, 1 : k + 1] = doc_ids[:k]
            starts[i, 1 : k + 1] = doc_starts[:k]
            real[i, : k + 2] = True
        special = (ids == self.cls_id) | (ids == self.sep_id) | ~real
        attention = None if real.all() else torch.from_numpy(real.astype(np.int64))
        return Batch(
            torch.from_numpy(ids), torch.from_numpy(special), torch.from_numpy(starts), attention, int(real.sum())
        )

    def _packed(self, n: int, length: int) -> Batch:
        """``n`` rows of [CLS] and the next ``length - 1`` tokens of the document stream each, cut in one go."""
        body = length - 1
        while len(self._ids) < n * body:
            self._refill()
        ids = np.empty((n, length), dtype=np.int64)
        starts = np.ones((n, length), dtype=bool)
        ids[:, 0] = self.cls_id
        ids[:, 1:] = self._ids[: n * body].reshape(n, body)
        starts[:, 1:] = self._starts[: n * body].reshape(n, body)
        self._ids, self._starts = self._ids[n * body :], self._starts[n * body :]
        special = (ids == self.cls_id) | (ids == self.sep_id)
        return Batch(torch.from_numpy(ids), torch.from_numpy(special), torch.from_numpy(starts), None, ids.size)

    def state_dict(self) -> dict[str, Any]:
        s = self._reader.position()
        return {
            "epoch": s.epoch,
            "shard": s.shard,
            "row_group": s.row_group,
            "row": s.row,
            "ids": self._ids.tolist(),
            "starts": self._starts.tolist(),
            "docs": [(a.tolist(), b.tolist()) for a, b in self._docs],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._reader.seek(CursorState(state["epoch"], state["shard"], state["row_group"], state["row"]))
        self._ids = np.asarray(state["ids"], dtype=np.int64)
        self._starts = np.asarray(state["starts"], dtype=bool)
        self._docs = [(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=bool)) for a, b in state["docs"]]


def pack_texts(
    tokenizer: PreTrainedTokenizerBase, texts: Iterable[str], length: int, max_sequences: int | None = None
) -> Batch | None:
    """Pack a fixed list of texts (held-out evaluation) into full sequences; the tail shorter than one
    sequence is dropped. Returns None if the texts fill no sequence."""
    ids_parts, start_parts = [], []
    for ids, st in encode_documents(tokenizer, list(texts)):
        ids_parts.append(np.append(ids, tokenizer.sep_token_id))
        start_parts.append(np.append(st, True))
    if not ids_parts:
        return None
    ids, starts = np.concatenate(ids_parts), np.concatenate(start_parts)
    n = len(ids) // (length - 1)
    if max_sequences is not None:
        n = min(n, max_sequences)
    if n == 0:
        return None
    body = ids[: n * (length - 1)].reshape(n, length - 1)
    st = starts[: n * (length - 1)].reshape(n, length - 1)
    full = np.concatenate([np.full((n, 1), tokenizer.cls_token_id), body], axis=1)
    full_st = np.concatenate([np.ones((n, 1), dtype=bool), st], axis=1)
    special = (full == tokenizer.cls_token_id) | (full == tokenizer.sep_token_id)
    return Batch(torch.from_numpy(full), torch.from_numpy(special), torch.from_numpy(full_st), None, int(full.size))


def read_jsonl_texts(patterns: list[str], limit: int) -> list[str]:
    """The ``text`` fields of the first ``limit`` records of JSONL(.gz) files matching ``patterns``."""
    paths = []
    for pattern in patterns:
        matched = sorted(glob.glob(pattern))
        if not matched:
            raise DataError("general evaluation corpus not found", file=pattern, field="pretrain.general_eval_corpus")
        paths += matched
    return list(islice(iter_texts(paths), limit))
