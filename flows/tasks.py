"""Prefect tasks around the stage functions: retries with backoff, caching on the stages' fingerprints, JSON results.

Each task receives a ``RunSpec`` (plain data) carrying the config resolved at the start of the run, validates
it again into a ``DomainConfig`` (never re-reading the YAML), calls one stage function and returns its JSON
summary. Results are serialised as JSON (never pickled) into the configured
result storage; cache keys are the stages' own fingerprints (``caching``). ``configured`` applies the run's ``ExecutionOptions``
(storage, retries, cache refresh) to a task at flow time. A cancel ends the task it interrupts Cancelled
(``cancelling.cancellable_task``). User errors (``DomainbertError``) never retry.
Stage loggers (``domainbert.*``) are forwarded to the Prefect log while a stage runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from prefect import get_run_logger, task
from prefect.filesystems import RemoteFileSystem
from prefect.tasks import exponential_backoff

from domainbert.core.errors import DomainbertError
from domainbert.core.logs import VERBOSE_ENV
from domainbert.flows import caching
from domainbert.flows.cancelling import cancellable_task, quiet_cancelled_tasks
from domainbert.flows.launch import LAUNCH_LOG, follow_log
from domainbert.flows.options import ExecutionOptions, RunSpec

if TYPE_CHECKING:
    from prefect import Task
    from prefect.client.schemas.objects import State, TaskRun

P = ParamSpec("P")
R = TypeVar("R")


def _retry_unless_user_error(_task: Task[..., Any], _task_run: TaskRun, state: State) -> bool:
    """Retry I/O and crashes; a bad config or data file fails the same way every time."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an unreadable state is retried like a crash
        return True
    return not isinstance(exc, DomainbertError)


def result_storage(opts: ExecutionOptions, root: Path) -> Path | str:
    """Where task results go: a local folder (default ``<run>/.prefect/results``), an fsspec URL (saved once
    as a ``remote-file-system`` block named after the URL) or ``block:<type-slug>/<name>`` of a saved block."""
    url = opts.result_storage or str(root / ".prefect" / "results")
    if url.startswith("block:"):
        return url.removeprefix("block:")
    if "://" in url and not url.startswith("file://"):
        import hashlib

        name = "domainbert-" + hashlib.sha256(url.encode()).hexdigest()[:12]
        RemoteFileSystem(basepath=url).save(name, overwrite=True)
        return f"remote-file-system/{name}"
    return Path(url.removeprefix("file://")).resolve()


def configured(
    tsk: Task[P, R], opts: ExecutionOptions, root: Path, *, retries: int | None = None, refresh: bool = False
) -> Task[P, R]:
    """``tsk`` with this run's result storage and retry policy; ``refresh`` (or ``opts.refresh_cache``) makes
    it run and overwrite its cached result (the flows set it when the stage's output is not complete)."""
    quiet_cancelled_tasks()
    n = opts.retries if retries is None else retries
    delays: Any = exponential_backoff(backoff_factor=opts.retry_delay_seconds) if opts.retry_delay_seconds else 0
    return tsk.with_options(
        result_storage=result_storage(opts, root),
        retries=n,
        retry_delay_seconds=delays,
        refresh_cache=opts.refresh_cache or refresh,
    )


class ProgressArtifacts(logging.Handler):
    """Turns the training loops' progress records (``record.progress = (step, total, label)``, progress.py)
    into one Prefect progress artifact per label on the current task run, updated as the run goes."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.ids: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        progress = getattr(record, "progress", None)
        if not progress:
            return
        step, total, label = progress
        percent = round(100.0 * step / max(total, 1), 1)
        try:
            from prefect.artifacts import create_progress_artifact, update_progress_artifact

            if label in self.ids:
                update_progress_artifact(self.ids[label], percent)
            else:
                self.ids[label] = create_progress_artifact(percent, description=f"{label}: steps done")
        except Exception:  # noqa: BLE001 - a progress bar must never stop training
            self.handleError(record)


@contextmanager
def stage_logs_to_prefect() -> Iterator[None]:
    """Forward ``domainbert.*`` log records to the Prefect run log while a stage runs, and its training
    progress to progress artifacts (``ProgressArtifacts``)."""
    try:
        from prefect.logging.handlers import APILogHandler
    except ImportError:  # pragma: no cover - older Prefect
        yield
        return
    target = logging.getLogger("domainbert")
    # Prefect may already forward this logger (PREFECT_LOGGING_EXTRA_LOGGERS); each handler is added once.
    added: list[logging.Handler] = []
    if not any(isinstance(h, APILogHandler) for h in target.handlers):
        added.append(APILogHandler())
        added[-1].setLevel(logging.INFO)
    if not any(isinstance(h, ProgressArtifacts) for h in target.handlers):
        added.append(ProgressArtifacts())
    old_level = target.level
    if os.environ.get(VERBOSE_ENV):  # --verbose: the stage's DEBUG lines too, in this Dask worker's console
        target.setLevel(logging.DEBUG)
    elif added and target.getEffectiveLevel() > logging.INFO:
        target.setLevel(logging.INFO)
    for handler in added:
        target.addHandler(handler)
    try:
        yield
    finally:
        for handler in added:
            target.removeHandler(handler)
        target.setLevel(old_level)


COMMON: dict[str, Any] = {
    "persist_result": True,
    "result_serializer": "json",
    "retry_condition_fn": _retry_unless_user_error,
}


@task(name="corpus", cache_key_fn=caching.corpus_key, tags=["cpu"], **COMMON)
@cancellable_task
def corpus_task(spec: RunSpec) -> dict:
    """Build the corpus (``build_corpus``); returns the manifest."""
    from domainbert.corpus.build import build_corpus

    cfg = spec.config()
    with stage_logs_to_prefect():
        return build_corpus(cfg, spec.layout(cfg))


@task(name="corpus-split", **COMMON)
@cancellable_task
def corpus_split_task(spec: RunSpec) -> dict:
    """Index the evaluation texts and cut the sources into input shards; returns the shard specs and counts."""
    from domainbert.corpus.build import prepare, split_inputs, work_dir_for

    cfg = spec.config()
    work_dir = work_dir_for(cfg, spec.layout(cfg))
    with stage_logs_to_prefect():
        prepare(cfg, work_dir)
        shards, counts = split_inputs(cfg, work_dir)
    return {"work_dir": str(work_dir), "shards": shards, "counts": counts}


@task(name="corpus-shard", **COMMON)
@cancellable_task
def corpus_shard_task(spec: RunSpec, shard: dict, work_dir: str) -> dict:
    """Clean, filter, decontaminate and hash one input shard (skipped when already processed)."""
    from domainbert.corpus.shards import process_input_shard

    return process_input_shard(spec.config(), shard, Path(work_dir))


@task(name="corpus-merge", **COMMON)
@cancellable_task
def corpus_merge_task(spec: RunSpec, work_dir: str, stats: list[dict], counts: dict) -> dict:
    """Deduplicate across shards, split and write the corpus atomically (``finish``); returns the manifest."""
    from domainbert.corpus.build import finish

    cfg = spec.config()
    with stage_logs_to_prefect():
        return finish(cfg, spec.layout(cfg), Path(work_dir), stats, counts)


@task(name="vocab", cache_key_fn=caching.vocab_key, tags=["cpu"], **COMMON)
@cancellable_task
def vocab_task(spec: RunSpec) -> dict:
    """Train and measure the domain vocabulary (``run_vocab``); returns the vocab report."""
    from domainbert.vocab.stage import run_vocab

    cfg = spec.config()
    with stage_logs_to_prefect():
        return run_vocab(cfg, spec.layout(cfg))


@task(name="base-warmup", tags=["gpu"], **COMMON)
@cancellable_task
def base_warmup_task(spec: RunSpec) -> str | None:
    """Warm up the base checkpoint's MLM head when it needs it (``ensure_base_warmup``, skipped when up to date);
    returns the warmed model folder. Run before the arms, whose fingerprints read its result."""
    from domainbert.pretrain.base_warmup import ensure_base_warmup

    cfg = spec.config()
    with stage_logs_to_prefect():
        folder = ensure_base_warmup(cfg, spec.layout(cfg))
    return str(folder) if folder is not None else None


@task(name="pretrain-arm", cache_key_fn=caching.pretrain_key, tags=["gpu"], **COMMON)
@cancellable_task
def pretrain_task(spec: RunSpec, arm: str, gpu_limit: str | None = None) -> dict:
    """Pretrain one arm (``pretrain_arm``); a retry resumes from the arm's newest checkpoint.

    With ``pretrain.launch.launcher`` set to deepspeed or torchrun the stage starts the training processes
    and this task streams their log into the Prefect log.

    Args:
        spec: the run.
        arm: continued, extended or scratch.
        gpu_limit: name of a Prefect global concurrency limit to hold a slot of while training.
    """
    from prefect.concurrency.sync import concurrency

    from domainbert.pretrain.stage import pretrain_arm

    cfg = spec.config()
    layout = spec.layout(cfg)
    guard = concurrency(gpu_limit, occupy=1) if gpu_limit else nullcontext()
    with guard, follow_log(layout.pretrain(arm) / LAUNCH_LOG, get_run_logger()), stage_logs_to_prefect():
        return pretrain_arm(cfg, arm, layout)


@task(name="models-to-compare", **COMMON)
@cancellable_task
def models_task(spec: RunSpec) -> dict[str, str]:
    """The models the comparison fine-tunes: name -> reference (folder, hub id or package)."""
    from domainbert.finetune.jobs import models_to_compare

    cfg = spec.config()
    return {name: str(ref) for name, ref in models_to_compare(cfg, spec.layout(cfg)).items()}


@task(name="recipe-search", tags=["cpu"], **COMMON)
@cancellable_task
def recipe_task(spec: RunSpec) -> dict[str, dict]:
    """Each task's recipe search on the reference (``finetune.recipe``): its missing runs, then what it chose:
    ``lr_chosen`` and ``stop_chosen`` (``finetune``'s fields)."""
    from domainbert.finetune.jobs import overlaps_said_by_caller
    from domainbert.finetune.matrix import search_recipe

    cfg = spec.config()
    with stage_logs_to_prefect(), overlaps_said_by_caller():  # the flow said them (finetune_flow)
        ft = search_recipe(cfg, spec.layout(cfg)).finetune
        return {"lr_chosen": dict(ft.lr_chosen), "stop_chosen": dict(ft.stop_chosen)}


@task(name="finetune", cache_key_fn=caching.finetune_key, tags=["cpu"], **COMMON)
@cancellable_task
def finetune_task(
    spec: RunSpec, model_name: str, model_ref: str, task_name: str, seed: int, mode: str = "finetune"
) -> dict:
    """Fine-tune one model on one task with one seed (``mode``: finetune or frozen); returns the result
    without its prediction lists (those stay in result.json). A run under torchrun (``finetune.num_processes``)
    has its launch log forwarded to the Prefect log."""
    from domainbert.finetune.jobs import Job, overlaps_said_by_caller
    from domainbert.finetune.parallel import launch_log
    from domainbert.finetune.stage import finetune_one

    cfg = spec.config()
    layout = spec.layout(cfg)
    job = Job(model_name, model_ref, task_name, seed, mode)
    follow = follow_log(launch_log(layout, job), get_run_logger()) if cfg.finetune.num_processes > 1 else nullcontext()
    with follow, stage_logs_to_prefect(), overlaps_said_by_caller():  # the flow said them (finetune_flow)
        result = finetune_one(cfg, layout, model_name, model_ref, task_name, seed, mode=mode)
    return {k: v for k, v in dict(result).items() if k not in ("gold", "pred")}


@task(name="report", **COMMON)
@cancellable_task
def report_task(spec: RunSpec) -> str:
    """Render report.html and publish the report and results table as Prefect artifacts."""
    from domainbert.flows.publish import publish_report
    from domainbert.report.compare import render_report

    cfg = spec.config()
    layout = spec.layout(cfg)
    with stage_logs_to_prefect():
        path = render_report(cfg, layout)
    publish_report(cfg, layout, Path(path))
    return str(path)


@task(name="cross-domain-report", **COMMON)
@cancellable_task
def cross_domain_task(runs: dict[str, str], out_dir: str) -> str:
    """Render the cross-domain page over finished runs and publish it; returns the path of its report.html."""
    from domainbert.flows.publish import publish_cross_domain
    from domainbert.report.cross_domain import render_cross_domain

    with stage_logs_to_prefect():
        path = Path(render_cross_domain({name: Path(folder) for name, folder in runs.items()}, Path(out_dir)))
    publish_cross_domain(sorted(runs), path)
    return str(path)
