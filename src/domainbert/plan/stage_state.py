"""Whether each stage's output is current: the stage's own fingerprint and the record in its output folder.

One place for the question "is this stage done for this config and these inputs?": the Prefect flows use
``key`` as the task's cache key and ``current`` to decide whether a cached result may be trusted, and
``domainbert plan`` uses the same answers to say what will run. A stage is current when its output folder is
complete with exactly the fingerprint the stage computes now (``artifacts.is_complete``). This module never
imports Prefect and runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from domainbert.config.domain import DomainConfig
from domainbert.core.artifacts import damage, is_complete, read_record
from domainbert.core.errors import DomainbertError
from domainbert.core.paths import RunLayout

if TYPE_CHECKING:
    from pathlib import Path

    from domainbert.finetune.jobs import Job


@dataclass(frozen=True)
class StageState:
    """A stage's cache key (None when its inputs are not there yet) and whether its output is current."""

    key: str | None
    current: bool


UNKNOWN = StageState(None, False)  # the stage itself reports the missing input when it runs


def corpus_state(cfg: DomainConfig, layout: RunLayout) -> StageState:
    from domainbert.corpus.build import stage_fingerprint

    fp = stage_fingerprint(cfg)
    return StageState(f"corpus-{fp}", is_complete(layout.corpus, fp))


def vocab_state(cfg: DomainConfig, layout: RunLayout) -> StageState:
    from domainbert.vocab.stage import vocab_record

    fp = vocab_record(cfg, layout)[2]
    return StageState(f"vocab-{fp}", is_complete(layout.vocab, fp))


def pretrain_state(cfg: DomainConfig, layout: RunLayout, arm: str) -> StageState:
    from domainbert.pretrain.stage import arm_fingerprint

    try:
        fp = arm_fingerprint(cfg, arm, layout)
    except DomainbertError:  # e.g. the extended arm before the vocab stage has run
        return UNKNOWN
    done = is_complete(layout.pretrained_model(arm), fp) and (layout.pretrain(arm) / "summary.json").is_file()
    return StageState(f"pretrain-{fp}", done)


def finetune_state(cfg: DomainConfig, layout: RunLayout, job: Job) -> StageState:
    """``job``: a ``finetune.stage.Job`` (model, reference, task, seed, mode)."""
    from domainbert.finetune.best_model import group_fingerprints
    from domainbert.finetune.jobs import task_config
    from domainbert.finetune.stage import run_current
    from domainbert.task_data.splits import task_data_hash

    try:
        fps = group_fingerprints(cfg, job, task_data_hash(task_config(cfg, job.task_name)))
    except DomainbertError:  # an unknown task: the stage says so
        return UNKNOWN
    return StageState(f"finetune-{fps[job.seed]}", run_current(cfg, layout, job, fps))


def status(state: StageState, folder: Path) -> str:
    """``up to date``, ``will rerun: <file>: damaged: ...`` (its files no longer match their record),
    ``will rerun: config or inputs changed`` (a record with another fingerprint) or ``will run``."""
    if state.current:
        return "up to date"
    record = read_record(folder)
    if record is None:
        return "will run"
    problem = damage(folder, record)
    return f"will rerun: {problem}" if problem else "will rerun: config or inputs changed"
