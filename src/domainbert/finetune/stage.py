"""The fine-tuning stage: every model x task x seed, one ``result.json`` each, skipped when up to date.

Models compared (``models_to_compare``): the general base, each pretraining arm whose model folder exists,
then the YAML's ``finetune.extra_models``; with ``finetune.floor`` each task also gets a floor baseline
(``floors.run_floor``) stored as model ``floor``, seed 0, with the same result keys. With ``finetune.mode: frozen`` (or ``both``) the feature-based runs
are stored under ``<model>-frozen``.

``layout.finetune(model, task, seed)/result.json`` holds:
``model``, ``model_ref``, ``mode`` (finetune/frozen), ``task``, ``task_type`` (ner/classification),
``multi_label``, ``seed``, ``primary_metric`` (``f1`` for NER, ``macro_f1`` for classification),
``test`` (NER: f1, precision, recall = seqeval strict IOB2 micro; macro_f1; per_type {type: precision, recall,
f1, support}. Classification: macro_f1, accuracy, and micro_f1 for multi-label), ``validation`` (same keys, of
the kept weights), ``gold``/``pred`` (test answers in test-file order: a tag list per sentence for NER, a label
or sorted label list per example for classification), ``num_examples`` per split, ``history`` (validation per
evaluation), ``best_step``, ``steps``, ``stopped_early``, ``train_seconds``, ``train_examples``,
``examples_per_s``, ``num_parameters``, ``trainable_parameters``, ``processes`` (1, or the ranks of a run under
torchrun; floors have none), ``wall_seconds`` and ``cpu_seconds`` (the
whole run, loading and evaluation included; CPU time over all threads), ``collapse`` / ``collapse_validation``
(``collapse.diagnose`` of the test / validation predictions), ``collapsed`` (the test diagnosis), ``lr`` (the
learning rate of the kept run) and ``retry`` (None, or, when the first attempt's validation predictions
collapsed and the seed was run again at ``lr * collapse_retry_lr_factor``, both attempts' figures and which one
was ``kept``: ``collapse.kept_attempt``, on validation).

``finetune.save_models`` keeps fine-tuned models: by default (``best``) each run's model is offered to
``finetune/<model>/<task>/best/`` and kept there when it is the group's best seed on validation
(``best_model``); with ``all`` each run's folder also holds ``model/`` (``export.save_task_model``) with a card,
written into the run's atomic output with ``result.json``, so it is complete or absent. Neither
``save_models`` nor ``num_processes`` is part of the fingerprint (the result does not depend on them), but a
run is current only when the models asked of it are there: the group's best run reruns when the kept folder
lacks its model, every run without ``model/`` under ``all`` (``run_current``). With ``finetune.num_processes`` above 1 a run is trained under torchrun
(``parallel.launch_run``) and this process reads back the result rank 0 wrote.
This module does not compare models; ``stats.compare_models`` and the report do.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.config.finetune import TaskConfig
from domainbert.core import signals
from domainbert.core.artifact_types import FinetuneResult, dump_artifact
from domainbert.core.artifacts import atomic_output, is_complete, read_record
from domainbert.core.distributed import dist_info
from domainbert.core.fingerprints import portable
from domainbert.core.paths import RunLayout
from domainbert.core.progress import tagged
from domainbert.finetune.attempts import train_attempts
from domainbert.finetune.best_model import current_results, group_fingerprints, model_missing, offer
from domainbert.finetune.expectations import expected_runs, result_state
from domainbert.finetune.export import MODEL
from domainbert.finetune.jobs import (
    FLOOR,
    FLOOR_SEED,
    RESULT,
    Job,
    chosen_stop,
    load_task_data,
    run_record,
    task_config,
    task_lr,
)
from domainbert.finetune.parallel import launch_run, launches
from domainbert.finetune.runner import PRIMARY
from domainbert.finetune.track_run import open_tracker, send_run
from domainbert.finetune.trainer import TrainSettings
from domainbert.task_data.splits import TaskData, task_data_hash

logger = logging.getLogger(__name__)


def settings_for(cfg: DomainConfig, seed: int, mode: str, task: TaskConfig | None = None) -> TrainSettings:
    """The loop settings of one run: ``finetune``'s, with the task's own lr (given, else chosen by its search:
    ``finetune.recipe``) and epochs where it sets them."""
    ft = cfg.finetune
    lr = ft.frozen_lr if mode == "frozen" else (task_lr(cfg, task) if task is not None else ft.lr)
    epochs = task.epochs if task is not None and task.epochs else ft.epochs
    return TrainSettings(
        epochs=epochs,
        lr=lr,
        batch_size=ft.batch_size,
        eval_batch_size=ft.eval_batch_size,
        warmup_ratio=ft.warmup_ratio,
        weight_decay=ft.weight_decay,
        max_grad_norm=ft.max_grad_norm,
        patience=ft.early_stopping_patience,
        evals_per_epoch=ft.evals_per_epoch,
        length_group_size=ft.length_group_size,
        seed=seed,
        frozen=mode == "frozen",
        device=ft.device,
        precision=ft.precision,
        stop_step=chosen_stop(cfg, task, mode) if task is not None else None,
        min_steps=ft.min_steps,
        eval_delay=task.eval_delay if task is not None else 0.0,
        eval_inference_mode=ft.eval_inference_mode,
        eval_length_sorted=ft.eval_length_sorted,
    )


@tagged("{model_name}/{task_name}/seed-{seed}")  # log lines of parallel runs told apart
def finetune_one(
    cfg: DomainConfig,
    layout: RunLayout,
    model_name: str,
    model_ref: str,
    task_name: str,
    seed: int,
    *,
    mode: str | None = None,
    data: TaskData | None = None,
) -> dict[str, Any]:
    """Fine-tune one model on one task with one seed; write ``result.json`` (skipped when up to date).

    Args:
        cfg: the domain config.
        layout: the run's folders.
        model_name: the name results are stored under (``base``, an arm, an extra model).
        model_ref: what to load (``package:...``, a folder, a hub id).
        task_name: a task of ``cfg.finetune.tasks``.
        seed: the seed of the head initialisation, dropout and data order.
        mode: ``finetune`` or ``frozen``; defaults to ``cfg.finetune.mode`` (``finetune`` when it is ``both``).
        data: the task already loaded (saves re-reading it across models and seeds).

    Returns:
        The result dict (also in ``layout.finetune(model_name, task_name, seed)/result.json``).
    """
    task = task_config(cfg, task_name)
    mode = mode or ("finetune" if cfg.finetune.mode == "both" else cfg.finetune.mode)
    job = Job(model_name, model_ref, task_name, seed, mode)
    run_cfg, inputs, fp = run_record(cfg, job, data.data_hash if data is not None else None)
    if mode == FLOOR:
        return _floor(cfg, task, layout, data, (run_cfg, inputs, fp))
    final = layout.finetune(model_name, task_name, seed)
    fps = group_fingerprints(cfg, job, data.data_hash if data is not None else task_data_hash(task))
    if run_current(cfg, layout, job, fps):
        logger.info("%s/%s/seed-%d skipped: up to date", model_name, task_name, seed)
        return json.loads((final / RESULT).read_text())
    if launches(cfg.finetune.num_processes):
        launch_run(cfg, layout, job)
        signals.check(f"after {model_name}/{task_name}/seed-{seed}")  # the run is written; stop before the next
        return json.loads((final / RESULT).read_text())
    if data is None:
        data = load_task_data(cfg, task)
    logger.info("fine-tuning %s (%s, %s) on %s, seed %d", model_name, model_ref, mode, task_name, seed)
    t0, c0 = time.perf_counter(), time.process_time()
    rank, world = dist_info()
    writer = rank == 0  # under torchrun only rank 0 tracks, saves and writes
    saving = cfg.finetune.save_models != "none" and writer
    staging = final.with_name(f"{final.name}.model-tmp-{os.getpid()}") if saving else None
    out = _tracked_train(cfg, layout, job, data, fp, staging, writer)
    result = {
        **_run_fields(job, task, data),
        "processes": world,
        "wall_seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        **out,
    }
    if writer:
        write_result(cfg, layout, job, result, (run_cfg, inputs, fps), staging, data.label_list)
    return result


def _run_fields(job: Job, task: TaskConfig, data: TaskData) -> dict[str, Any]:
    """What a result says about its run besides the scores: model, task, seed, examples and split overlap."""
    return {
        "model": job.model_name,
        # Named as fingerprints name paths (relative to the project or the cache): a result copied with its
        # run folder, or read on another machine, names the same model.
        "model_ref": portable(job.model_ref),
        "mode": job.mode,
        "task": job.task_name,
        "task_type": task.type,
        "multi_label": task.multi_label,
        "seed": job.seed,
        "primary_metric": PRIMARY[task.type],
        "num_examples": {k: len(v) for k, v in data.splits.items()},
        "split_overlap": data.split_overlap,
    }


def _tracked_train(
    cfg: DomainConfig,
    layout: RunLayout,
    job: Job,
    data: TaskData,
    fp: str,
    staging: Path | None,
    writer: bool,
) -> dict[str, Any]:
    """``_train`` with the run's tracker opened before training and sent the curve after (rank 0 only); a
    failed run closes its tracker FAILED and leaves no staged model behind."""
    if cfg.finetune.torch_threads:
        import torch

        torch.set_num_threads(cfg.finetune.torch_threads)
    settings = settings_for(cfg, job.seed, job.mode, task_config(cfg, job.task_name))
    tracker = open_tracker(cfg, layout, job, settings, fp) if writer else None  # before training: see track_run
    try:
        out = train_attempts(cfg, data, job.model_ref, settings, job, staging)
    except BaseException:
        if tracker:
            tracker.close("FAILED")
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    if tracker:
        send_run(tracker, out)
    return out


def write_result(
    cfg: DomainConfig,
    layout: RunLayout,
    job: Job,
    result: dict[str, Any],
    record: tuple[dict, dict[str, str], dict[int, str]],
    staging: Path | None,
    labels: list[str],
) -> None:
    """``result.json`` (with ``save_models: all``, ``model/`` and its card beside it: one atomic folder), then the
    saved model offered as the group's kept model (``best_model.offer``)."""
    run_cfg, inputs, fps = record
    final = layout.finetune(job.model_name, job.task_name, job.seed)
    in_run = staging is not None and cfg.finetune.save_models == "all"
    try:
        with atomic_output(final, config=run_cfg, inputs=inputs, fp=fps[job.seed], root=layout.root) as tmp:
            (tmp / RESULT).write_text(dump_artifact(FinetuneResult, result, final / RESULT))
            if in_run and staging is not None:
                from domainbert.cards.finetuned_and_corpus import finetuned_card

                os.replace(staging, tmp / MODEL)
                custom = (tmp / MODEL / "modeling_mean_pool.py").is_file()
                (tmp / MODEL / "README.md").write_text(finetuned_card(cfg, result, labels, custom_code=custom))
        saved = final / MODEL if in_run else staging
        if saved is not None:
            offer(cfg, layout, job, fps, saved, labels)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)  # gone when moved; offered or a failed write's otherwise


def has_model(folder: Path) -> bool:
    """Whether a run folder's record lists a saved model, and it is there."""
    record = read_record(folder) or {}
    return f"{MODEL}/config.json" in (record.get("files") or {}) and (folder / MODEL / "config.json").is_file()


def run_current(
    cfg: DomainConfig,
    layout: RunLayout,
    job: Job,
    fps: dict[int, str],
    group_results: dict[int, dict[str, Any]] | None = None,
) -> bool:
    """Whether the job's folder holds its current result (fingerprint ``fps[job.seed]``) and every model
    ``finetune.save_models`` asks of this run: its own (``all``), the group's kept one when this run is the
    group's best (``best_model.model_missing``). Floors save none."""
    folder = layout.finetune(job.model_name, job.task_name, job.seed)
    if not (is_complete(folder, fps[job.seed]) and (folder / RESULT).is_file()):
        return False
    save = cfg.finetune.save_models
    if job.mode == FLOOR or save == "none":
        return True
    if save == "all" and not has_model(folder):
        return False
    return not model_missing(layout, job, fps, group_results)


def expected_results(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> list[dict[str, Any]]:
    """Every result the config asks for (``expectations.expected_runs``) and its state: ``current``,
    ``no model`` (current, but ``finetune.save_models`` asks for the model and the folder has none: the run will
    rerun, the result stays usable), ``stale``, ``damaged``, ``unrecorded`` or ``missing`` (``expectations.result_state``)."""
    out = []
    runs = expected_runs(cfg, layout, planned)
    groups: dict[tuple[str, str], dict[int, str]] = {}
    for run in runs:
        groups.setdefault((run.model, run.task), {})[run.seed] = run.fingerprint
    read: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for run in runs:
        state = result_state(layout, run)
        job = Job(run.model, "", run.task, run.seed, run.mode)
        key = (run.model, run.task)
        if state == "current" and key not in read:  # each group's results read once, not once per run
            read[key] = current_results(layout, job, groups[key])
        if state == "current" and not run_current(cfg, layout, job, groups[key], read[key]):
            state = "no model"
        out.append({"model": run.model, "task": run.task, "seed": run.seed, "mode": run.mode, "state": state})
    return out


def _floor(
    cfg: DomainConfig,
    task: TaskConfig,
    layout: RunLayout,
    data: TaskData | None,
    record: tuple[dict, dict[str, str], str],
) -> dict[str, Any]:
    """The task's floor baseline (``floors.run_floor``) stored like a model's result (skipped when up to date)."""
    from domainbert.finetune.collapse import diagnose
    from domainbert.finetune.floors import run_floor

    run_cfg, inputs, fp = record
    final = layout.finetune(FLOOR, task.name, FLOOR_SEED)
    if is_complete(final, fp) and (final / RESULT).is_file():
        logger.info("%s/%s skipped: up to date", FLOOR, task.name)
        return json.loads((final / RESULT).read_text())
    data = data or load_task_data(cfg, task)
    t0, c0 = time.perf_counter(), time.process_time()
    out = run_floor(data)
    collapse = diagnose(task.type, out["gold"], out["pred"], multi_label=task.multi_label)
    result = {
        "model": FLOOR,
        "model_ref": out["floor_method"],
        "mode": FLOOR,
        "task": task.name,
        "task_type": task.type,
        "multi_label": task.multi_label,
        "seed": FLOOR_SEED,
        "primary_metric": PRIMARY[task.type],
        "num_examples": {k: len(v) for k, v in data.splits.items()},
        "split_overlap": data.split_overlap,
        "wall_seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        "collapse": collapse,
        "collapsed": bool(collapse["collapsed"]),
        "retry": None,
        **out,
    }
    logger.info(
        "floor on %s: test %s %.4f (%s)",
        task.name,
        PRIMARY[task.type],
        out["test"][PRIMARY[task.type]],
        out["floor_method"],
    )
    with atomic_output(final, config=run_cfg, inputs=inputs, fp=fp, root=layout.root) as tmp:
        (tmp / RESULT).write_text(dump_artifact(FinetuneResult, result, final / RESULT))
    return result
