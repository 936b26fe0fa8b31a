"""General-text replay in an arm's token stream (``pretrain.replay``): domain rows and general rows in one batch.

``ReplayStream`` wraps two ``data.TokenStream``\\ s, the arm's own text and the replay text
(``replay_text.py``), and decides row by row where each sequence of a batch comes from. A row is general when
that keeps the general positions nearest to ``fraction`` of every position handed out so far, so the share
holds at every step, not only on average, and it does not depend on a random draw. The decision depends only
on the counts it keeps, which go into the checkpoint with both streams' positions: a resumed run mixes exactly
as an uninterrupted one. Each batch says how many of its real tokens were general, for the arm's summary.
This module neither builds the replay text nor masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from domainbert.pretrain.data import Batch, TokenStream


@dataclass
class ReplayStream:
    """The arm's stream with ``fraction`` of its positions taken from ``general``, with a resumable state."""

    domain: TokenStream
    general: TokenStream
    fraction: float
    positions: int = 0  # positions handed out, both sources
    general_positions: int = 0  # of them, from the general stream

    def sources(self, n: int, length: int) -> list[bool]:
        """Which of the next ``n`` rows of ``length`` come from general text (True), advancing the counts."""
        chosen = []
        for _ in range(n):
            self.positions += length
            # general when that leaves the general positions nearer the share than a domain row would
            general = self.general_positions + length / 2 < self.fraction * self.positions
            self.general_positions += length if general else 0
            chosen.append(general)
        return chosen

    def next_sequences(self, n: int, length: int) -> Batch:
        """``n`` sequences of ``length`` tokens, each from the domain or the general stream (``sources``)."""
        general_rows = torch.tensor(self.sources(n, length), dtype=torch.bool)
        parts = {
            source: stream.next_sequences(int(rows.sum()), length)
            for source, stream, rows in ((False, self.domain, ~general_rows), (True, self.general, general_rows))
            if bool(rows.any())
        }
        if len(parts) == 1:
            only = next(iter(parts.items()))
            return _marked(only[1], only[1].real_tokens if only[0] else 0)
        domain, general = parts[False], parts[True]

        def merged(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            out = torch.empty((n, *a.shape[1:]), dtype=a.dtype)
            out[~general_rows], out[general_rows] = a, b
            return out

        masks = (domain.attention_mask, general.attention_mask)
        attention = None
        if any(m is not None for m in masks):  # a packed part is all real
            full = [
                m if m is not None else torch.ones(p.input_ids.shape, dtype=torch.int64)
                for m, p in zip(masks, (domain, general), strict=True)
            ]
            attention = merged(*full)
        return Batch(
            merged(domain.input_ids, general.input_ids),
            merged(domain.special, general.special),
            merged(domain.word_start, general.word_start),
            attention,
            domain.real_tokens + general.real_tokens,
            general_tokens=general.real_tokens,
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "replay": {"positions": self.positions, "general_positions": self.general_positions},
            "domain": self.domain.state_dict(),
            "general": self.general.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.positions = int(state["replay"]["positions"])
        self.general_positions = int(state["replay"]["general_positions"])
        self.domain.load_state_dict(state["domain"])
        self.general.load_state_dict(state["general"])


def _marked(batch: Batch, general_tokens: int) -> Batch:
    batch.general_tokens = general_tokens
    return batch
