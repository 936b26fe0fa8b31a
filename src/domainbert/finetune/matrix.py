"""The whole fine-tuning matrix in one process (``domainbert finetune``): each task's learning-rate search
first (``recipe``), then every run of ``jobs.run_list`` at the chosen rates, through ``stage.finetune_one``.

The Prefect flow runs the same two steps as tasks of its own; this module is the command's loop, and holds no
training code of its own.
"""

from __future__ import annotations

import logging
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.core.paths import RunLayout
from domainbert.finetune import recipe
from domainbert.finetune.expectations import write_expected
from domainbert.finetune.jobs import load_task_data, run_list, task_config
from domainbert.finetune.stage import finetune_one
from domainbert.services.tasks import TaskData

logger = logging.getLogger(__name__)


def finetune_all(cfg: DomainConfig, layout: RunLayout) -> list[dict[str, Any]]:
    """Run the whole matrix (tasks x models x modes x seeds); finished runs are skipped.

    The same seeds, data subsets and batch order are used for every model, so that paired comparisons see
    only the models' differences.

    Returns:
        The result dicts, in run order.
    """
    cfg = search_recipe(cfg, layout)
    jobs = run_list(cfg, layout)
    write_expected(cfg, layout)
    logger.info(
        "fine-tuning matrix: %d runs (%d tasks; models x modes x seeds, and a floor per task)",
        len(jobs),
        len(cfg.finetune.tasks),
    )
    results = []
    loaded: dict[str, TaskData] = {}
    for i, job in enumerate(jobs, 1):
        if job.task_name not in loaded:
            loaded = {job.task_name: load_task_data(cfg, task_config(cfg, job.task_name))}  # one task at a time
        logger.info("run %d/%d: %s / %s / seed %d", i, len(jobs), job.model_name, job.task_name, job.seed)
        results.append(
            finetune_one(
                cfg,
                layout,
                job.model_name,
                job.model_ref,
                job.task_name,
                job.seed,
                mode=job.mode,
                data=loaded[job.task_name],
            )
        )
    return results


def search_recipe(cfg: DomainConfig, layout: RunLayout) -> DomainConfig:
    """Run the missing runs of each task's learning-rate search (``finetune.lr_grid``; ``recipe``), log each
    choice, and return ``cfg`` with the chosen rates (``recipe.applied``)."""
    jobs = recipe.search_jobs(cfg, layout)
    loaded: dict[str, TaskData] = {}
    for i, (_, run_cfg, job) in enumerate(jobs, 1):
        if job.task_name not in loaded:
            loaded = {job.task_name: load_task_data(cfg, task_config(cfg, job.task_name))}
        logger.info(
            "recipe search %d/%d: %s at lr %s", i, len(jobs), job.task_name, job.model_name.removeprefix("lr-")
        )
        sub = recipe.search_layout(layout)
        finetune_one(run_cfg, sub, job.model_name, job.model_ref, job.task_name, job.seed, data=loaded[job.task_name])
    state = recipe.search_state(cfg, layout)  # read once: every search run is written by now
    for task, results in state.items():
        logger.info("%s", recipe.chosen_line(task, results))
    return recipe.with_chosen(cfg, state)
