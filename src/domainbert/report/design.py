"""A run's power before its compute is spent: per task, the smallest difference between an arm and its reference
that the configured seeds and test split can detect, for ``domainbert plan``.

The standard error of a difference of two models' means combines the seeds' variance on both sides and the
paired test-set sampling (``power.prior_se``). The seed standard deviation is the base model's measured one where
this run folder holds at least two of its results on the task, else the stated prior (``power.PRIOR_SEED_SD``).
The level is the family-wise one the report will use (Holm over every comparison the report will make, its first
step at ``alpha / m``), and the figure is set against the gains the literature reports. This module trains
nothing and reads no model; the report's own figures come from the measured intervals (``power.apply_holm``).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from domainbert.finetune.expectations import expected_runs
from domainbert.finetune.jobs import RESULT
from domainbert.report.power import PRIOR_SEED_SD, detectable_difference, prior_se
from domainbert.report.results import comparison_pairs, model_order, primary_metric
from domainbert.services.published import PUBLISHED_GAINS, PUBLISHED_GAINS_SOURCE
from domainbert.services.tasks import load_task

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout


@dataclass(frozen=True)
class TaskPower:
    """One task's design: test examples, seeds, the seed sd used (and whence), and the detectable difference."""

    task: str
    test_examples: int
    seeds: int
    seed_sd: float
    seed_sd_source: str
    comparisons: int
    detectable: float

    @property
    def can_answer(self) -> bool:
        return self.detectable <= PUBLISHED_GAINS[1]

    def line(self) -> str:
        high = PUBLISHED_GAINS[1]
        text = (
            f"power {self.task}: {self.test_examples:,} test examples, {self.seeds} seed(s), seed sd "
            f"{100 * self.seed_sd:.1f} points ({self.seed_sd_source}): detects a difference of "
            f"{100 * self.detectable:.1f} points with 80% power over the report's {self.comparisons} comparisons"
        )
        if not self.can_answer:
            text += (
                f"; more than {PUBLISHED_GAINS_SOURCE} (up to {100 * high:.1f} points): this design cannot answer "
                "whether adaptation helped (more seeds or test examples would)"
            )
        return text


def _measured_seed_sd(layout: RunLayout, task: str, seeds: list[int]) -> float | None:
    """The base model's seed standard deviation on ``task`` from its results in this run folder (two or more)."""
    scores = []
    for seed in seeds:
        path = layout.finetune("base", task, seed) / RESULT
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
            scores.append(float(result["test"][primary_metric(result)]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return statistics.stdev(scores) if len(scores) >= 2 else None


def design_power(cfg: DomainConfig, layout: RunLayout) -> list[TaskPower]:
    """Per task, the design's detectable difference (a task whose files cannot be read here is left out)."""
    expected = expected_runs(cfg, layout, planned=True)
    names = model_order({r.model for r in expected}, list(cfg.pretrain.arms), list(cfg.finetune.extra_models))
    per_task = len(comparison_pairs(names))
    family = per_task * len(cfg.finetune.tasks)
    alpha = 1 - cfg.compare.confidence
    out = []
    for task in cfg.finetune.tasks:
        try:
            n_test = len(load_task(task).splits["test"])
        except Exception:  # noqa: BLE001 - a hub task offline: plan says nothing rather than failing
            continue
        seeds = list(cfg.finetune.seeds)
        measured = _measured_seed_sd(layout, task.name, seeds)
        sd = measured if measured is not None else PRIOR_SEED_SD
        source = "measured on this run's base" if measured is not None else "prior, no base results yet"
        se = prior_se(sd, len(seeds), n_test)
        out.append(
            TaskPower(task.name, n_test, len(seeds), sd, source, family, detectable_difference(se, alpha, family))
        )
    return out
