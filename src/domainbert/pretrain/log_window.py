"""What the training loop logs between two metrics records (``LogWindow``): each step's loss, the gradient norm,
throughput, and the figures an objective reports besides its loss (NSP's loss and accuracy; replaced-token
detection's generator loss and discriminator accuracy), summed across ranks when the window closes.

No step reads the device: a step's losses and figures stay on it as detached scalars, and ``read`` brings all
of them to the host in one transfer, at a logging step or before a checkpoint (issue 43: a host read of a
device scalar waits for every kernel queued before it, so one per step keeps the GPU from running ahead). The
values are the same Python floats a read per step gave (each scalar is converted exactly as ``float(t)``
would, and summed in the same order). This module does not train.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from domainbert.core.distributed import dist_info, sum_across
from domainbert.pretrain.objective import MLMObjective


@dataclass
class LogWindow:
    """Throughput and the unread figures of the steps since the last record."""

    tokens: int = 0
    start: float = field(default_factory=time.perf_counter)
    paused: float = 0.0  # seconds of evaluation and checkpointing inside the window: not training time
    nsp: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])  # loss sum (per pair), correct, pairs
    nsp_last: dict[str, float | None] = field(default_factory=lambda: {"nsp_loss": None, "nsp_accuracy": None})
    # generator loss sum (per masked token), masked tokens, correct detections, positions
    detection: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    detection_last: dict[str, float | None] = field(default_factory=dict)
    last_loss: float | None = None  # the loss of the last step read
    grad_norm: torch.Tensor | float | None = None  # the last optimizer step's (a tensor until read)
    # unread: (step, its micro-batches' losses); per micro-batch NSP (loss, correct, pairs) and detection figures
    _losses: list[tuple[int, list[torch.Tensor]]] = field(default_factory=list)
    _nsp: list[tuple[torch.Tensor, torch.Tensor, int]] = field(default_factory=list)
    _detection: list[tuple[torch.Tensor, int, torch.Tensor, int]] = field(default_factory=list)

    def add_step(self, step: int, losses: list[torch.Tensor], grad_norm: torch.Tensor | float | None) -> None:
        """Keep a finished step's micro-batch losses (detached, on the device) and its gradient norm."""
        self._losses.append((step, losses))
        self.grad_norm = grad_norm

    def add(self, objective: MLMObjective) -> None:
        """Keep the figures of the objective's last forward pass (on the device, unread)."""
        if objective.last_nsp is not None:
            self._nsp.append(objective.last_nsp)
        found = getattr(objective, "last_detection", None)
        if found is not None:
            self._detection.append((found.generator_loss, found.masked, found.correct, found.positions))

    def read(self) -> list[tuple[int, float]]:
        """Bring every unread figure to the host in one transfer; returns each unread step's loss (the mean of
        its micro-batches, averaged over ranks), adds the NSP and detection figures to the window's sums and
        reads the last gradient norm."""
        scalars: list[Any] = [t for _, losses in self._losses for t in losses]
        scalars += [t for loss, correct, _ in self._nsp for t in (loss, correct)]
        scalars += [t for loss, _, correct, _ in self._detection for t in (loss, correct)]
        norm_unread = isinstance(self.grad_norm, torch.Tensor)
        scalars += [self.grad_norm] if norm_unread else []
        if not scalars:
            return []
        # float64 holds every float32 loss and integer count exactly: the values are float(t)'s
        values = iter(torch.stack([t.detach().to(torch.float64) for t in scalars]).tolist())
        means = []
        for _, losses in self._losses:
            step_values = [next(values) for _ in losses]
            means.append(sum(step_values) / len(step_values))
        world_means = [total / dist_info()[1] for total in sum_across(means)] if means else []
        steps = [(step, value) for (step, _), value in zip(self._losses, world_means, strict=True)]
        for _, _, pairs in self._nsp:
            loss, correct = next(values), next(values)
            self.nsp = [self.nsp[0] + loss * pairs, self.nsp[1] + correct, self.nsp[2] + pairs]
        for _, masked, _, positions in self._detection:
            loss, correct = next(values), next(values)
            d = self.detection
            self.detection = [d[0] + loss * masked, d[1] + masked, d[2] + correct, d[3] + positions]
        if norm_unread:
            self.grad_norm = next(values)
        self._losses, self._nsp, self._detection = [], [], []
        if steps:
            self.last_loss = steps[-1][1]
        return steps

    def grad_norm_value(self) -> float | None:
        """The last optimizer step's gradient norm (read by ``read``)."""
        return None if self.grad_norm is None else float(self.grad_norm)

    def pause_since(self, t0: float) -> None:
        self.paused += time.perf_counter() - t0

    def close(self) -> float:
        """Tokens per second of training time since the last record; starts the next window (call ``read``
        first: figures still unread stay for the next window)."""
        tps = self.tokens / max(time.perf_counter() - self.start - self.paused, 1e-9)
        if self.nsp[2]:
            total = sum_across(self.nsp)
            self.nsp_last = {"nsp_loss": total[0] / total[2], "nsp_accuracy": total[1] / total[2]}
        if self.detection[3]:
            d = sum_across(self.detection)
            self.detection_last = {"generator_loss": d[0] / max(d[1], 1), "discriminator_accuracy": d[2] / d[3]}
        self.tokens, self.start, self.paused, self.nsp = 0, time.perf_counter(), 0.0, [0.0, 0.0, 0.0]
        self.detection = [0.0, 0.0, 0.0, 0.0]
        return tps
