"""The step plan of a run: how many optimizer steps the token budget buys and which sequence length and
batch size each step uses (the length schedule).

Every arm gets the same budget in tokens (``pretrain.budget_tokens``), so arms with different tokenizers are
compared at equal compute per token position. With a length schedule (BERT/SciBERT: 90% of steps at 128,
10% at 512) the batch size of a phase is scaled by ``seq_len / phase_len`` when ``constant_batch_tokens`` is
set, so tokens per step stay constant. ``max_steps`` caps the plan (tests, smoke runs). This module does
not train.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from domainbert.config.pretrain import PretrainConfig


@dataclass(frozen=True)
class Phase:
    start: int  # first optimizer step (0-based) of the phase
    end: int  # one past its last step
    seq_len: int
    batch_size: int  # sequences per process per micro-step

    def tokens_per_step(self, grad_accum: int, world_size: int) -> int:
        return self.seq_len * self.batch_size * grad_accum * world_size


@dataclass(frozen=True)
class Plan:
    total_steps: int
    phases: tuple[Phase, ...]
    planned_tokens: int

    def phase_at(self, step: int) -> Phase:
        for phase in self.phases:
            if phase.start <= step < phase.end:
                return phase
        return self.phases[-1]


def make_plan(pcfg: PretrainConfig, world_size: int = 1) -> Plan:
    """Steps and phases for ``pcfg.budget_tokens`` tokens across ``world_size`` processes."""
    spec = [(p.fraction, p.seq_len) for p in pcfg.seq_len_schedule] or [(1.0, pcfg.seq_len)]
    sizes = []
    for _, length in spec:
        if pcfg.constant_batch_tokens:
            sizes.append(max(1, round(pcfg.batch_size * pcfg.seq_len / length)))
        else:
            sizes.append(pcfg.batch_size)
    per_step = [length * size * pcfg.grad_accum * world_size for (_, length), size in zip(spec, sizes, strict=True)]
    mean_tokens = sum(frac * tps for (frac, _), tps in zip(spec, per_step, strict=True))
    total = max(1, math.ceil(pcfg.budget_tokens / mean_tokens))
    if pcfg.max_steps is not None:
        total = min(total, pcfg.max_steps)
    phases, start = [], 0
    for i, ((frac, length), size) in enumerate(zip(spec, sizes, strict=True)):
        end = total if i == len(spec) - 1 else min(total, start + round(frac * total))
        if end > start:
            phases.append(Phase(start, end, length, size))
        start = end
    if not phases:
        phases.append(Phase(0, total, spec[-1][1], sizes[-1]))
    planned = sum((p.end - p.start) * p.tokens_per_step(pcfg.grad_accum, world_size) for p in phases)
    return Plan(total, tuple(phases), planned)
