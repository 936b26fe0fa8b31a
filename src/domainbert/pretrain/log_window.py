"""What the training loop logs between two metrics records (``LogWindow``): throughput, and the figures an
objective reports besides its loss (NSP's loss and accuracy; replaced-token detection's generator loss and
discriminator accuracy), summed across ranks when the window closes. This module does not train.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from domainbert.core.distributed import sum_across
from domainbert.pretrain.objective import MLMObjective


@dataclass
class LogWindow:
    """Throughput and NSP figures accumulated between two metrics records."""

    tokens: int = 0
    start: float = field(default_factory=time.perf_counter)
    paused: float = 0.0  # seconds of evaluation and checkpointing inside the window: not training time
    nsp: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])  # loss sum (per pair), correct, pairs
    nsp_last: dict[str, float | None] = field(default_factory=lambda: {"nsp_loss": None, "nsp_accuracy": None})
    # generator loss sum (per masked token), masked tokens, correct detections, positions
    detection: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    detection_last: dict[str, float | None] = field(default_factory=dict)

    def add(self, objective: MLMObjective) -> None:
        """Add the figures of the objective's last forward pass."""
        if objective.last_nsp is not None:
            loss, correct, pairs = objective.last_nsp
            self.nsp = [self.nsp[0] + float(loss) * pairs, self.nsp[1] + float(correct), self.nsp[2] + pairs]
        found = getattr(objective, "last_detection", None)
        if found is not None:
            d = self.detection
            self.detection = [
                d[0] + float(found.generator_loss) * found.masked,
                d[1] + found.masked,
                d[2] + float(found.correct),
                d[3] + found.positions,
            ]

    def pause_since(self, t0: float) -> None:
        self.paused += time.perf_counter() - t0

    def close(self) -> float:
        """Tokens per second of training time since the last record; starts the next window."""
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
