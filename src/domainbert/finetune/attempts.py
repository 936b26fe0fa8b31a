"""A fine-tuning run's attempts: the first, a second at another learning rate when the first collapsed on
validation, and the one of the two the run keeps.

``train_attempts`` is what the stage calls for one (model, task, seed); ``collapse.kept_attempt`` decides on
validation alone which attempt is the result, and only the kept attempt's model is left in the staging folder.
This module writes no result and tracks nothing (``stage`` does).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.finetune.collapse import kept_attempt
from domainbert.finetune.jobs import Job
from domainbert.finetune.runner import PRIMARY, run_finetune
from domainbert.finetune.trainer import TrainSettings
from domainbert.task_data.splits import TaskData

logger = logging.getLogger(__name__)


def train_attempts(
    cfg: DomainConfig, data: TaskData, model_ref: str, settings: TrainSettings, job: Job, save_to: Path | None = None
) -> dict[str, Any]:
    """``run_finetune``, run once more at ``lr * collapse_retry_lr_factor`` when validation predictions collapsed;
    the attempt ``collapse.kept_attempt`` picks on validation is the result, and its model is the one saved to
    ``save_to`` (when given). ``retry`` records both attempts' figures and which was kept."""
    out = run_finetune(data, model_ref, settings, cfg.finetune.max_length, cfg.finetune.pooling, save_to)
    out["retry"], out["lr"] = None, settings.lr
    factor = cfg.finetune.collapse_retry_lr_factor
    if out["collapse_validation"]["collapsed"] and factor:
        out = _retry(cfg, data, model_ref, dataclasses.replace(settings, lr=settings.lr * factor), job, out, save_to)
    out["collapsed"] = bool(out["collapse"]["collapsed"])
    return out


def _figures(attempt: dict[str, Any]) -> dict[str, Any]:
    """What ``retry`` keeps of an attempt: its rate, why its validation collapsed, its scores."""
    reasons = attempt["collapse_validation"]["reasons"]
    return {"lr": attempt["lr"], "reasons": reasons, "validation": attempt["validation"], "test": attempt["test"]}


def _retry(
    cfg: DomainConfig,
    data: TaskData,
    model_ref: str,
    settings: TrainSettings,
    job: Job,
    first: dict[str, Any],
    save_to: Path | None,
) -> dict[str, Any]:
    """The second attempt of a run whose first collapsed on validation, and the one of the two to keep.

    Decided on validation only, so the test set never steers which run is kept. The retry's model is staged
    beside ``save_to`` and replaces the first's only when the retry is kept."""
    logger.warning(
        "%s/%s/seed-%d collapsed on validation (%s); retrying at lr %g",
        job.model_name,
        job.task_name,
        job.seed,
        "; ".join(first["collapse_validation"]["reasons"]),
        settings.lr,
    )
    retry_to = save_to.with_name(f"{save_to.name}-retry") if save_to is not None else None
    try:
        second = run_finetune(data, model_ref, settings, cfg.finetune.max_length, cfg.finetune.pooling, retry_to)
    except BaseException:  # a full disk or a stop mid-retry: no half-saved model is left beside the run
        if retry_to is not None:
            shutil.rmtree(retry_to, ignore_errors=True)
        raise
    second["lr"] = settings.lr
    kept = kept_attempt(first, second, PRIMARY[data.config.type])
    out = second if kept == "retry" else first
    if retry_to is not None and save_to is not None:
        if kept == "retry":
            shutil.rmtree(save_to, ignore_errors=True)
            retry_to.rename(save_to)
        else:
            shutil.rmtree(retry_to, ignore_errors=True)
    if kept == "first":
        logger.warning(
            "%s/%s/seed-%d: the retry at lr %g scored %.4f on validation against the first attempt's %.4f; "
            "kept the first",
            job.model_name,
            job.task_name,
            job.seed,
            settings.lr,
            second["validation"][PRIMARY[data.config.type]],
            first["validation"][PRIMARY[data.config.type]],
        )
    out["retry"] = {"first": _figures(first), "second": _figures(second), "lr": settings.lr, "kept": kept}
    return out
