"""Tokenizing the next blocks of documents on worker threads while the current batch trains (``BlockReader``).

The Rust tokenizer releases the GIL, so a few threads, each encoding a different block, use several cores even
with ``TOKENIZERS_PARALLELISM=false`` (the pipeline's setting, which keeps the tokenizer's own thread pool out
of forked processes). Blocks are handed out in reading order, so the token stream is exactly the one a single
thread gives; the resumable position is that of the oldest block not yet handed out, so a checkpoint never
skips a block that was still being tokenized. Worker threads are used on a GPU run only: on a CPU run they
would compete with the training step's own threads for the same cores. A training run with a fast tokenizer
reads the split's stored token ids instead (``token_store.py``) and tokenizes nothing while it trains; this
reader is the stream's own when none is given (``data.TokenStream(blocks=None)``). This module reads and
tokenizes; it does not pack or mask (``data.py``, ``masking.py``).
"""

from __future__ import annotations

import copy
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
import torch

Block = tuple[np.ndarray, np.ndarray, np.ndarray]


class BlockSource(Protocol):
    """What ``data.TokenStream`` reads blocks from: ``BlockReader`` or ``token_store.StoredReader``."""

    cursor: Any

    def next_block(self) -> Block: ...
    def position(self) -> Any: ...
    def seek(self, position: Any) -> None: ...
    def close(self) -> None: ...


MAX_WORKERS = 4  # at most: the cores beyond stay with the training process's other threads


def default_workers(device: torch.device) -> int:
    """Tokenizer threads for a run on ``device``: up to ``MAX_WORKERS`` of this process's cores on a GPU, none
    (tokenize in the training thread) on a CPU."""
    if device.type == "cpu":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(MAX_WORKERS, cores)


class BlockReader:
    """The next tokenized blocks of a ``DocumentCursor``, read ahead on ``workers`` threads (0: none).

    Args:
        tokenizer: a Hugging Face tokenizer (a slow one is never read ahead).
        cursor: the documents' position (``data.DocumentCursor``); the reader advances it.
        encode: ``data.encode_block``, (tokenizer, texts, backend or None) -> a block.
        backend_of: ``data``'s fast backend of a tokenizer, copied once for the threads.
        workers: tokenizer threads; 0 or 1 tokenize each block when it is asked for.
    """

    def __init__(
        self,
        tokenizer: Any,
        cursor: Any,
        encode: Callable[..., Block],
        backend_of: Callable[[Any], Any],
        workers: int = 0,
    ) -> None:
        self.tokenizer, self.cursor = tokenizer, cursor
        self.encode, self.backend_of = encode, backend_of
        self.workers = workers if workers > 1 and getattr(tokenizer, "is_fast", False) else 0
        self._pool: ThreadPoolExecutor | None = None
        self._backend: Any = None
        self._pending: deque[tuple[Any, Future[Block]]] = deque()

    def next_block(self) -> Block:
        """Token ids, word-start flags and token counts of the next block (``data.encode_block``)."""
        if not self.workers:
            return self.encode(self.tokenizer, self.cursor.read_block())
        if self._pool is None:
            # The threads' own copy: the wrapper sets truncation on the shared one, which a running encode holds.
            self._backend = copy.deepcopy(self.backend_of(self.tokenizer))
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="domainbert-tokenize")
        while len(self._pending) < 2 * self.workers:
            position = self.cursor.state
            texts = self.cursor.read_block()
            self._pending.append((position, self._pool.submit(self.encode, self.tokenizer, texts, self._backend)))
        return self._pending.popleft()[1].result()

    def position(self) -> Any:
        """Where the next block not yet handed out starts."""
        return self._pending[0][0] if self._pending else self.cursor.state

    def seek(self, position: Any) -> None:
        """Drop the blocks read ahead and continue from ``position``."""
        for _, future in self._pending:
            future.cancel()
        self._pending.clear()
        self.cursor.state = position

    def close(self) -> None:
        self.seek(self.position())
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
