"""The whole fine-tuning matrix in one process (``domainbert finetune``): each task's recipe search first
(``recipe``), then every run of ``jobs.run_list`` with the chosen recipe, through ``stage.finetune_one``.

The search's run at the chosen rate is the same computation as ``base``'s first seed (the reference, the first
seed, that rate), so ``search_recipe`` writes it as that run (``adopt``: its scores and model under base's own
record) instead of training it twice. The Prefect flow runs the same two steps as tasks of its own; this module
is the command's loop, and holds no training code of its own.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.core.paths import RunLayout
from domainbert.finetune import recipe
from domainbert.finetune.best_model import group_fingerprints
from domainbert.finetune.expectations import write_expected
from domainbert.finetune.export import MODEL
from domainbert.finetune.jobs import RESULT, Job, load_task_data, only_models, run_list, run_record, task_config
from domainbert.finetune.ner import repair_lines
from domainbert.finetune.stage import finetune_one, has_model, run_current, settings_for, write_result
from domainbert.finetune.track_run import open_tracker, send_run
from domainbert.task_data.splits import TaskData

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
    for line in repair_lines(results):
        logger.info("%s", line)
    return results


def search_recipe(cfg: DomainConfig, layout: RunLayout) -> DomainConfig:
    """Run the missing runs of each task's recipe search (``finetune.lr_grid``, ``finetune.early_stopping``;
    ``recipe``), log each choice, and return ``cfg`` with what was chosen (``recipe.applied``)."""
    jobs = recipe.search_jobs(cfg, layout)
    loaded: dict[str, TaskData] = {}
    sub = recipe.search_layout(layout)
    for i, (_, run_cfg, job) in enumerate(jobs, 1):
        if job.task_name not in loaded:
            loaded = {job.task_name: load_task_data(cfg, task_config(cfg, job.task_name))}
        logger.info(
            "recipe search %d/%d: %s at lr %s", i, len(jobs), job.task_name, job.model_name.removeprefix("lr-")
        )
        finetune_one(run_cfg, sub, job.model_name, job.model_ref, job.task_name, job.seed, data=loaded[job.task_name])
    state = recipe.search_state(cfg, layout)  # read once: every search run is written by now
    stops = cfg.finetune.early_stopping == "reference"
    for task, results in state.items():
        logger.info("%s", recipe.chosen_line(task, results, stops))
    chosen, rates = recipe.with_chosen(cfg, state), recipe.chosen_rates(state)
    compared = "base" in only_models(cfg, {"base": ""})  # a run that compares the arms alone has no base to fill
    for lr, _, job in jobs:
        if compared and rates.get(job.task_name) == lr:
            if (state[job.task_name][lr].get("retry") or {}).get("kept") == "retry":
                # kept at lr x the retry factor: not the computation base's first seed makes at the chosen rate
                logger.info("%s: the search's run kept its retry; base's first seed trains on its own", job.task_name)
                continue
            first = Job("base", job.model_ref, job.task_name, job.seed, "finetune")
            if job.task_name not in loaded:
                loaded = {job.task_name: load_task_data(cfg, task_config(cfg, job.task_name))}
            adopt(chosen, layout, first, sub.finetune(job.model_name, job.task_name, job.seed), loaded[job.task_name])
    return chosen


def adopt(cfg: DomainConfig, layout: RunLayout, job: Job, source: Path, data: TaskData) -> bool:
    """Write ``job``'s run from ``source``, a finished run of the same computation: its result (named for the
    job, with ``adopted_from``), its tracked curve and, where ``finetune.save_models`` keeps models, its model,
    under the job's own record. Nothing is written (False) when the job is current already, or when it must
    save a model and ``source`` holds none (a search run from before search runs kept theirs): it trains."""
    fps = group_fingerprints(cfg, job, data.data_hash)
    if run_current(cfg, layout, job, fps):
        return False
    saving = cfg.finetune.save_models != "none"
    if saving and not has_model(source):
        return False
    result = {**json.loads((source / RESULT).read_text()), "model": job.model_name}
    result["adopted_from"] = source.relative_to(layout.root).as_posix()
    run_cfg, inputs, fp = run_record(cfg, job, data.data_hash)
    final = layout.finetune(job.model_name, job.task_name, job.seed)
    staging = final.with_name(f"{final.name}.model-tmp-{os.getpid()}") if saving else None
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source / MODEL, staging)
    settings = settings_for(cfg, job.seed, job.mode, task_config(cfg, job.task_name))
    tracker = open_tracker(cfg, layout, job, settings, fp)
    write_result(cfg, layout, job, result, (run_cfg, inputs, fps), staging, data.label_list)
    if tracker:
        send_run(tracker, result)
    logger.info(
        "%s/%s/seed-%d is the search's run at its chosen rate: %s",
        job.model_name,
        job.task_name,
        job.seed,
        result["adopted_from"],
    )
    return True
