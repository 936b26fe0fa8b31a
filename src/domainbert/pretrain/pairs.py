"""Sentence-pair sequences for next-sentence prediction (original BERT; off by default, as in RoBERTa).

Each sequence is ``[CLS] A [SEP] B [SEP]`` with token type 0 on ``[CLS] A [SEP]`` and 1 on ``B [SEP]``. A is
a run of tokens from the current document, cut at a word start chosen at random. With probability 1/2, B is
the text that follows A in the same document (label 0, IsNext); otherwise B is a run of tokens from another
document (label 1, NotNext; transformers' convention for ``next_sentence_label``). After a NotNext pair the
true continuation is not skipped: the next pair starts right after A, as in BERT's
``create_pretraining_data.py``. The random documents come from the block of already tokenized documents
that the stream holds (at least ``POOL_DOCS`` of them), which the seeded block shuffle of the corpus cursor
makes a random sample of the corpus.

Documents are not split into sentences (the corpus has no sentence boundaries to trust), so "sentence"
means a segment; segments end at word starts. Pairs are not packed: a pair whose document runs out before
the sequence is full is padded (``attention_mask`` then marks the real tokens), so ``pretrain.packing``
does not apply. Every random choice of a pair draws from a generator seeded by (seed, pair number), and the
state (cursor position, held documents, offset, pair number) is saved in checkpoints like ``TokenStream``'s:
a resumed run builds exactly the pairs an uninterrupted one would. This module does not mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbert.core.errors import DataError
from domainbert.pretrain.data import Batch, CursorState, DocumentCursor, encode_documents

POOL_DOCS = 16  # documents held besides the current one, to draw NotNext segments from
IS_NEXT, NOT_NEXT = 0, 1


def _word_cut(starts: np.ndarray, low: int, high: int, rng: np.random.Generator) -> int:
    """A random position in ``[low, high]`` where a word starts (any position there if none does)."""
    candidates = np.flatnonzero(starts[low : high + 1]) + low
    if len(candidates) == 0:
        return int(rng.integers(low, high + 1))
    return int(rng.choice(candidates))


@dataclass
class PairStream:
    """``[CLS] A [SEP] B [SEP]`` sequences from a corpus split, with a resumable state.

    Args:
        tokenizer: a tokenizer with [CLS], [SEP] and [PAD].
        corpus_dir: the corpus folder.
        split: the corpus split to read.
        shuffle_seed: the corpus cursor's shuffle seed (None: corpus order).
        seed: seeds the choice of cut points, labels and random segments.
    """

    tokenizer: Any
    corpus_dir: Path
    split: str = "train"
    shuffle_seed: int | None = None
    seed: int = 0
    cursor: DocumentCursor = field(init=False)
    _docs: list[tuple[np.ndarray, np.ndarray]] = field(init=False, default_factory=list)
    _offset: int = field(init=False, default=0)  # tokens of _docs[0] already used
    _pairs: int = field(init=False, default=0)  # pairs built so far (keys each pair's generator)

    def __post_init__(self) -> None:
        self.cursor = DocumentCursor(self.corpus_dir, self.split, shuffle_seed=self.shuffle_seed)
        self.cls_id = self.tokenizer.cls_token_id
        self.sep_id = self.tokenizer.sep_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def _fill(self) -> None:
        """Hold the current document (with at least 2 unused tokens) and ``POOL_DOCS`` others."""
        first_epoch = self.cursor.state.epoch
        while True:
            if self._docs and len(self._docs[0][0]) - self._offset < 2:
                self._docs.pop(0)  # a last token alone cannot form a pair
                self._offset = 0
                continue
            if len(self._docs) > POOL_DOCS:
                return
            if not self._docs and self.cursor.state.epoch > first_epoch + 1:
                raise DataError(
                    "the corpus split has too few documents of two or more tokens for sentence pairs",
                    file=self.corpus_dir,
                    field="pretrain.next_sentence_prediction",
                )
            # Documents of one token can be neither A with a continuation nor worth a NotNext draw.
            self._docs.extend(d for d in encode_documents(self.tokenizer, self.cursor.read_block()) if len(d[0]) >= 2)

    def _pair(self, body: int) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(token ids, word starts, length of A, label) of the next pair; ids and starts hold A then B."""
        self._fill()
        rng = np.random.default_rng([self.seed, self._pairs])
        self._pairs += 1
        ids, starts = self._docs[0]
        off = self._offset
        total = min(len(ids) - off, body)
        a = _word_cut(starts[off : off + total], 1, total - 1, rng)
        seg_a = slice(off, off + a)
        if rng.random() < 0.5:
            self._offset = off + total
            seg_b = slice(off + a, off + total)
            return (
                np.concatenate([ids[seg_a], ids[seg_b]]),
                np.concatenate([starts[seg_a], starts[seg_b]]),
                a,
                IS_NEXT,
            )
        other_ids, other_starts = self._docs[int(rng.integers(1, len(self._docs)))]
        want = body - a
        start = _word_cut(other_starts, 0, max(len(other_ids) - want, 0), rng)
        seg_b = slice(start, start + want)
        self._offset = off + a
        return (
            np.concatenate([ids[seg_a], other_ids[seg_b]]),
            np.concatenate([starts[seg_a], other_starts[seg_b]]),
            a,
            NOT_NEXT,
        )

    def next_sequences(self, n: int, length: int) -> Batch:
        """``n`` pair sequences of ``length`` positions (padded where a pair is shorter)."""
        body = length - 3  # [CLS] A [SEP] B [SEP]
        if body < 2:
            raise ValueError(f"sequence length {length} is too short for a sentence pair")
        ids = np.full((n, length), self.pad_id, dtype=np.int64)
        starts = np.ones((n, length), dtype=bool)
        types = np.zeros((n, length), dtype=np.int64)
        real = np.zeros((n, length), dtype=bool)
        labels = np.zeros(n, dtype=np.int64)
        special = np.zeros((n, length), dtype=bool)
        for i in range(n):
            pair_ids, pair_starts, a, labels[i] = self._pair(body)
            b = len(pair_ids) - a
            ids[i, 0], ids[i, a + 1], ids[i, a + b + 2] = self.cls_id, self.sep_id, self.sep_id
            special[i, [0, a + 1, a + b + 2]] = True
            ids[i, 1 : a + 1], ids[i, a + 2 : a + b + 2] = pair_ids[:a], pair_ids[a:]
            starts[i, 1 : a + 1], starts[i, a + 2 : a + b + 2] = pair_starts[:a], pair_starts[a:]
            types[i, a + 2 : a + b + 3] = 1
            real[i, : a + b + 3] = True
        special |= ~real
        attention = None if real.all() else torch.from_numpy(real.astype(np.int64))
        return Batch(
            torch.from_numpy(ids),
            torch.from_numpy(special),
            torch.from_numpy(starts),
            attention,
            int(real.sum()),
            token_type_ids=torch.from_numpy(types),
            next_sentence_label=torch.from_numpy(labels),
        )

    def state_dict(self) -> dict[str, Any]:
        s = self.cursor.state
        return {
            "epoch": s.epoch,
            "shard": s.shard,
            "row_group": s.row_group,
            "row": s.row,
            "docs": [(a.tolist(), b.tolist()) for a, b in self._docs],
            "offset": self._offset,
            "pairs": self._pairs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor.state = CursorState(state["epoch"], state["shard"], state["row_group"], state["row"])
        self._docs = [(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=bool)) for a, b in state["docs"]]
        self._offset = int(state["offset"])
        self._pairs = int(state["pairs"])
