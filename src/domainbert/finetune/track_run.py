"""One fine-tuning run (model x task x seed) in the trackers of ``tracking.report_to``.

The tracker opens before training, so a backend that cannot start stops the run before any compute is
spent. When the run ends, its curve goes out at the loop's step numbers: the mean training loss and the
validation metrics of each evaluation, then the test metrics of the kept weights at the last step, with
the settings as parameters and tags for the domain, model, task, seed and mode. Tracker files (TensorBoard
events, W&B offline runs, ``tracking.json``) live under ``<run>/tracking/finetune/<model>/<task>/seed-N``:
the result folder itself is written atomically and holds only the result. This module trains nothing.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from domainbert import __version__
from domainbert.core.paths import RunLayout
from domainbert.finetune.trainer import TrainSettings
from domainbert.trackers import Tracker

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.finetune.jobs import Job


def open_tracker(
    cfg: DomainConfig, layout: RunLayout, job: Job, settings: TrainSettings, fingerprint: str
) -> Tracker | None:
    """The run's tracker; None when ``tracking.report_to`` is empty."""
    if not cfg.tracking.report_to:
        return None
    folder = layout.root / "tracking" / "finetune" / job.model_name / job.task_name / f"seed-{job.seed}"
    params = {
        "model": job.model_name,
        "task": job.task_name,
        "seed": job.seed,
        "mode": job.mode,
        "max_length": cfg.finetune.max_length,
        "pooling": cfg.finetune.pooling,
        "settings": dataclasses.asdict(settings),
    }
    return Tracker(
        cfg.tracking,
        folder=folder,
        store_root=layout.root,
        domain=cfg.name,
        run_name=f"finetune/{job.model_name}/{job.task_name}/seed-{job.seed}",
        fingerprint=fingerprint,
        params=params,
        resume_step=None,
        tags={
            "domainbert.stage": "finetune",
            "domainbert.model": job.model_name,
            "domainbert.task": job.task_name,
            "domainbert.seed": str(job.seed),
            "domainbert.mode": job.mode,
            "domainbert.version": __version__,
        },
    )


def send_run(tracker: Tracker, out: dict[str, Any]) -> None:
    """The kept run's evaluations and test scores (``runner.run_finetune``'s output), then close."""
    for entry in out["history"]:
        tracker.log(
            entry["step"],
            {
                "train/loss": entry["loss"],
                "train/epoch": entry["epoch"],
                **{f"validation/{k}": v for k, v in entry["validation"].items()},
            },
        )
    tracker.log(
        out["steps"],
        {
            **{f"test/{k}": v for k, v in out["test"].items()},
            "best_step": out["best_step"],
            "collapsed": float(out["collapse"]["collapsed"]),
        },
    )
    tracker.close()
