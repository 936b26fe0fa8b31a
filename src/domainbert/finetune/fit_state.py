"""What the fine-tuning loop (``trainer.fit``) tracks between steps: counters, the loss windows of the collapse
check, the evaluations, and the kept (best) weights with the early-stopping decision.

Host-device syncs: a step's loss stays on the device, detached, until the loop logs (a progress line, an
evaluation, the end). ``FitState.read`` then brings every unread loss to the host in one transfer, checks that
each is finite (a non-finite loss fails the run there, naming its step; no result is written either way) and
keeps the same Python floats a read per step gave.

It leaves out the loop itself, the optimizer and the data order (``trainer.py``, ``batching.py``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from domainbert.core.errors import ModelError

if TYPE_CHECKING:
    from torch import nn


@dataclass
class FitState:
    """What the loop tracks between steps: counters, the loss windows, and the kept (best) evaluation."""

    total: int
    steps_per_epoch: int
    end: int = 0  # the step the run stops at when it is not the schedule's last (``stop_step``); 0: ``total``
    step: int = 0
    seen: int = 0
    train_seconds: float = 0.0
    train_cpu: float = 0.0
    losses: list[float] = field(default_factory=list)  # since the last evaluation
    unread: list[tuple[int, torch.Tensor | float]] = field(default_factory=list)  # (step, loss) still on the device
    curve: list[float] = field(default_factory=list)  # the first tenth of the steps (collapse check)
    tail: list[float] = field(default_factory=list)  # the last tenth
    history: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    best_state: dict[str, torch.Tensor] | None = None
    best_step: int = 0
    best_loss: float = math.inf  # the training loss over the steps before the kept evaluation
    bad: int = 0
    stopped: bool = False

    @property
    def stopped_early(self) -> bool:
        """Stopped by its patience before the last step it was to take (at that step it is not early)."""
        return self.stopped and self.step < (self.end or self.total)

    @property
    def window(self) -> int:
        """A tenth of the steps the run takes (not of the schedule: a run stopped early would compare its loss
        with itself and read as one whose loss did not fall)."""
        return max(1, (self.end or self.total) // 10)

    def add_loss(self, value: torch.Tensor | float, examples: int, seconds: float, cpu: float) -> None:
        """Count a finished step; its loss (a detached device scalar, or a float already read) stays unread."""
        self.train_seconds += seconds
        self.train_cpu += cpu
        self.seen += examples
        self.unread.append((self.step, value))
        self.step += 1

    def read(self) -> None:
        """Bring the unread losses to the host (one transfer) and into the windows, in step order; its time
        counts as training (it waits for the steps queued on the device).

        Raises:
            ModelError: at the first non-finite loss, naming its step.
        """
        if not self.unread:
            return
        t0, c0 = time.perf_counter(), time.process_time()
        tensors = [v.detach().to(torch.float64) for _, v in self.unread if isinstance(v, torch.Tensor)]
        read = iter(torch.stack(tensors).tolist() if tensors else [])  # float64 holds a float32 loss exactly
        values = [(step, next(read) if isinstance(v, torch.Tensor) else v) for step, v in self.unread]
        self.unread = []
        self.train_seconds += time.perf_counter() - t0
        self.train_cpu += time.process_time() - c0
        for step, value in values:
            if not math.isfinite(value):
                raise ModelError(
                    f"fine-tuning loss is {value} at step {step + 1}: the model's weights are "
                    "damaged or the learning rate is too high; no result was written"
                )
            self.losses.append(value)
            if len(self.curve) < self.window:
                self.curve.append(value)
            self.tail = (self.tail + [value])[-self.window :]

    def add_evaluation(
        self, metrics: dict[str, Any], primary: str, model: nn.Module, patience: int, min_steps: int = 0
    ) -> dict[str, Any]:
        """Record an evaluation, keep the weights when it is the best so far, decide early stopping (not before
        ``min_steps``: a slow metric's plateau early in a short run is not its end)."""
        loss = float(np.mean(self.losses))
        entry = {
            "step": self.step,
            "epoch": round(self.step / self.steps_per_epoch, 3),
            "loss": loss,
            "validation": metrics,
        }
        self.history.append(entry)
        self.losses.clear()
        if self._improves(metrics[primary], loss, primary):
            self.best, self.best_step, self.bad, self.best_loss = metrics, self.step, 0, loss
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            self.bad += 1
        self.stopped = self.bad >= patience and self.step >= min_steps
        return entry

    def _improves(self, score: float, loss: float, primary: str) -> bool:
        """Better on validation, or level with the best while the training loss has fallen since it: a tie on a
        coarse metric (F1 still 0 while the tagger learns to leave O, one more of 12 examples right) is not a
        worsening, and stopping on it ends runs before they learn."""
        if self.best is None or score > self.best[primary]:
            return True
        return score == self.best[primary] and loss < self.best_loss

    def result(self) -> dict[str, Any]:
        return {
            "history": self.history,
            "best": self.best,
            "best_step": self.best_step,
            "steps": self.step,
            "stopped_early": self.stopped_early,
            "loss_start": float(np.mean(self.curve)) if self.curve else None,
            "loss_end": float(np.mean(self.tail)) if self.tail else None,
            "train_seconds": self.train_seconds,
            "train_cpu_seconds": self.train_cpu,
            "train_examples": self.seen,
            "examples_per_s": self.seen / self.train_seconds if self.train_seconds > 0 else 0.0,
        }
