"""What one arm's training changes each step and a checkpoint holds besides weights, optimizer and RNG
(``TrainState``), stored as a dict, with the data stream's position."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from domainbert.pretrain.data import TokenStream
from domainbert.pretrain.pairs import PairStream
from domainbert.pretrain.replay import ReplayStream


@dataclass
class TrainState:
    """What a checkpoint holds besides weights, optimizer and RNG (stored as a dict with these keys)."""

    fingerprint: str
    step: int = 0
    tokens: int = 0
    real_tokens: int = 0
    general_tokens: int = 0  # of ``tokens``, those replayed from general text (pretrain.replay)
    positions: int = 0
    train_seconds: float = 0.0
    loss_curve: list[list[float]] = field(default_factory=list)
    before: dict[str, float | None] = field(default_factory=dict)
    resumed_from: list[int] = field(default_factory=list)

    def to_checkpoint(self, stream: PairStream | TokenStream | ReplayStream) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "data": stream.state_dict()}

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any], stream: PairStream | TokenStream | ReplayStream) -> TrainState:
        stream.load_state_dict(saved["data"])
        names = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in saved.items() if k in names})
        state.resumed_from = state.resumed_from + [state.step]
        return state
