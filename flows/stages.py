"""One Prefect flow per stage: corpus, vocab, pretrain, finetune, report.

Each flow takes a ``RunSpec`` (domain, overrides, profile, run folder) and ``ExecutionOptions`` (storage,
retries, Dask, launcher) as typed parameters, so each can be deployed and run on its own from the UI, and
``domain_pipeline`` calls them in order as subflows, passing the config it resolved at the start of the run.
Wiring only: the work is in the stage functions.
Parallel work (corpus shards, fine-tuning runs) goes through a task runner picked at run time: a thread
pool by default, or Prefect's Dask task runner on a Dask cluster (``execution.dask_address``) or a
local one (``execution.dask_local_workers``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from prefect import flow, get_run_logger
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from domainbert.config.domain import resolved_dict
from domainbert.config.pretrain import ARMS, split_replicate
from domainbert.core import signals
from domainbert.finetune import recipe
from domainbert.flows import caching
from domainbert.flows.cancelling import cancellable, unless_cancelled
from domainbert.flows.locking import locked
from domainbert.flows.options import ExecutionOptions, RunSpec, start_run
from domainbert.flows.publish import artifact_key, publish_markdown_file
from domainbert.flows.tasks import (
    base_warmup_task,
    configured,
    corpus_merge_task,
    corpus_shard_task,
    corpus_split_task,
    corpus_task,
    finetune_task,
    models_task,
    pretrain_task,
    recipe_task,
    report_task,
    vocab_task,
)

DEFAULT_EXECUTION = ExecutionOptions()


@contextlib.contextmanager
def task_runner(opts: ExecutionOptions, threads: int | None = None) -> Iterator[Any]:
    """The started task runner for parallel tasks: Dask (remote or local cluster) or a thread pool.

    A local Dask cluster sets ``OMP_NUM_THREADS=1`` (and its MKL/OpenBLAS kin) in this process's environment
    before spawning its workers and leaves it there; torch reads it when it first sizes its thread pool, so
    every later stage of the run (the base warm-up, the arms' training processes) would train on one core.
    The environment is restored when the runner closes. How local workers start and end: ``local_workers``.
    """
    saved = dict(os.environ)
    try:
        with contextlib.ExitStack() as stack:
            if opts.dask_local_workers and not opts.dask_address:
                local_workers = _local_workers()
                with local_workers.starting():
                    runner = stack.enter_context(local_workers.runner(opts.dask_local_workers))
                    local_workers.start(runner.client)  # the client: Prefect's runner starts its cluster at first use
                stack.callback(local_workers.close, runner.client)  # before the runner closes its cluster (LIFO)
            elif opts.dask_address:
                runner = stack.enter_context(_dask_runner_class()(address=opts.dask_address))
            else:
                runner = stack.enter_context(ThreadPoolTaskRunner(max_workers=threads or os.cpu_count() or 1))
            try:
                yield runner
            except BaseException as exc:
                signum = _stop_signal(exc)
                if signum is not None:  # before the workers close: their runs stop at the next step
                    signals.tell_other_processes(signum)
                raise
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _dask_runner_class() -> Any:
    from domainbert.core.extras import require

    return require("prefect_dask", "dask", "--dask-address / --dask-workers").DaskTaskRunner


def _local_workers() -> Any:
    _dask_runner_class()  # the extra's one line if it is missing, before a module that imports it
    from domainbert.flows import local_workers

    return local_workers


def _stop_signal(exc: BaseException) -> int | None:
    """The signal behind an exception that ends a flow: ours (StopRequested), Prefect's flow engine's own
    (TerminationSignal, its SIGTERM bridge) or Ctrl-C; None for any other failure."""
    from prefect.exceptions import TerminationSignal

    if isinstance(exc, signals.StopRequested):
        return exc.signum
    if isinstance(exc, TerminationSignal):
        return int(exc.signal)
    if isinstance(exc, KeyboardInterrupt):
        return int(signal.SIGINT)
    return None


def _prepare(spec: RunSpec) -> tuple[RunSpec, Any, Any]:
    spec = start_run(spec)  # resolved once: inside domain_pipeline, the pipeline's config
    cfg = spec.config()
    layout = spec.layout(cfg)
    layout.root.mkdir(parents=True, exist_ok=True)
    cfg = recipe.applied(cfg, layout)  # the recipe the run's searches chose, where they are done
    return _with_recipe(spec, cfg), cfg, layout


def _with_recipe(spec: RunSpec, cfg: Any) -> RunSpec:
    """``spec`` carrying ``cfg``'s chosen recipe (``finetune.lr_chosen``, ``finetune.stop_chosen``) to every task
    it is given to."""
    if spec.resolved_config is None or not (cfg.finetune.lr_chosen or cfg.finetune.stop_chosen):
        return spec
    return spec.model_copy(update={"resolved_config": resolved_dict(cfg)})


@flow(name="domainbert-corpus", log_prints=True)
@locked
@cancellable
def corpus_flow(spec: RunSpec, execution: ExecutionOptions = DEFAULT_EXECUTION) -> dict:
    """Build the domain corpus, one Prefect task per input shard, and publish its statistics report.

    A corpus that is already complete for these inputs is a cache hit of the ``corpus`` task. Otherwise the
    sources are cut into input shards, each shard is processed by its own task (in parallel on the task
    runner: threads locally, Dask workers on a cluster; a shard done by an earlier attempt is skipped), and
    a merge task deduplicates across shards and writes the corpus atomically.
    """
    spec, cfg, layout = _prepare(spec)
    if not caching.corpus_state(cfg, layout).current:
        plan = unless_cancelled(configured(corpus_split_task, execution, layout.root)(spec))
        shard = configured(corpus_shard_task, execution, layout.root)
        get_run_logger().info("corpus: %d input shard(s) in %s", len(plan["shards"]), plan["work_dir"])
        with task_runner(execution, threads=cfg.corpus.workers) as runner:
            futures = [
                runner.submit(shard, {"spec": spec, "shard": s, "work_dir": plan["work_dir"]}) for s in plan["shards"]
            ]
            stats = results_or_stop(futures, "while building corpus shards")
        merge = configured(corpus_merge_task, execution, layout.root)
        unless_cancelled(merge(spec, plan["work_dir"], stats, plan["counts"]))
        # Record the finished corpus under its cache key (the stage only reads the manifest back).
        manifest = unless_cancelled(configured(corpus_task, execution, layout.root, refresh=True)(spec))
    else:
        manifest = unless_cancelled(configured(corpus_task, execution, layout.root)(spec))
    publish_markdown_file(
        layout.corpus / "report.md", artifact_key(cfg.name, "corpus"), f"Corpus statistics for {cfg.name}"
    )
    return manifest


@flow(name="domainbert-vocab", log_prints=True)
@locked
@cancellable
def vocab_flow(spec: RunSpec, execution: ExecutionOptions = DEFAULT_EXECUTION) -> dict:
    """Train the domain tokenizer, measure vocabulary fit and build the extended model."""
    spec, cfg, layout = _prepare(spec)
    current = caching.vocab_state(cfg, layout).current
    report = unless_cancelled(configured(vocab_task, execution, layout.root, refresh=not current)(spec))
    publish_markdown_file(
        layout.vocab / "report.md", artifact_key(cfg.name, "vocab"), f"Vocabulary fit for {cfg.name}"
    )
    return report


@flow(name="domainbert-pretrain", log_prints=True)
@locked
@cancellable
def pretrain_flow(
    spec: RunSpec, execution: ExecutionOptions = DEFAULT_EXECUTION, arms: list[str] | None = None
) -> dict[str, dict]:
    """Pretrain each arm (all arms of the config by default), one after the other.

    Arms run in sequence: on one GPU node they would fight over the device; on several nodes deploy this
    flow once per arm (``arms: [scratch]``) and let the GPU pool's concurrency limit schedule them.
    """
    spec, cfg, layout = _prepare(spec)
    summaries = {}
    arms = arms or cfg.pretrain.replicate_names()
    if any(
        not ARMS[split_replicate(arm)[0]].from_scratch for arm in arms
    ):  # first: checkpoint-based arms' fingerprints read it
        warmup = configured(base_warmup_task, execution, layout.root, retries=execution.pretrain_retries)
        unless_cancelled(warmup(spec))
    for arm in arms:
        run = configured(
            pretrain_task,
            execution,
            layout.root,
            retries=execution.pretrain_retries,
            refresh=not caching.pretrain_state(cfg, layout, arm).current,
        )
        summaries[arm] = unless_cancelled(run(spec, arm, execution.gpu_concurrency_limit))
    return summaries


SETTLE_S = 5.0  # of a stop's 10 s: the runs under way end Cancelled at their next step


def results_or_stop(futures: list[PrefectFuture[Any]], where: str) -> list[Any]:
    """Every future's result, in order; a stop request (Ctrl-C, SIGTERM, SIGUSR1) ends the wait within a second. The
    runs under way stop at their next step (the stop file ``core.signals`` shares with the workers) and no
    queued run starts (``_settle``).

    Not ``prefect.futures.wait(timeout=...)``: its timeout is a SIGALRM in the main thread that raises wherever
    that thread is when it fires (a garbage collector's callback, a lock being released under a future's done
    callback), which printed "Exception ignored" and "release unlocked lock" tracebacks into healthy runs."""
    all_done, lock, left = threading.Event(), threading.Lock(), [len(futures)]

    def one_done(_: Any) -> None:
        with lock:
            left[0] -= 1
            if left[0] <= 0:
                all_done.set()

    try:
        if not futures:
            all_done.set()
        for future in futures:
            future.add_done_callback(one_done)  # at once for a future already done
        while not all_done.wait(1.0):
            signals.check(where)
        signals.check(where)  # runs that ended because of a stop return what they had, not results
    except BaseException:
        _settle(futures)
        raise
    return [f.result() for f in futures]


def _settle(futures: list[PrefectFuture[Any]]) -> None:
    """Cancel the runs not started yet and let the ones under way end (Cancelled at their next step) before the
    task runner is left: leaving it sets every run's cancel event, and a run whose engine was just starting then
    ended Crashed ("Task run cancelled by the task runner") instead of Cancelled."""
    left = []
    for future in futures:
        wrapped = getattr(future, "wrapped_future", None)
        # the thread pool's own futures only: Dask's workers stop through the stop file, and cancelling their
        # futures while the client closes makes distributed print its tracebacks
        if isinstance(wrapped, concurrent.futures.Future):
            if wrapped.cancel():
                continue
            left.append(wrapped)
    concurrent.futures.wait(left, timeout=SETTLE_S)  # a plain wait: no alarm signal (results_or_stop)


@flow(name="domainbert-finetune", log_prints=True)
@locked
@cancellable
def finetune_flow(spec: RunSpec, execution: ExecutionOptions = DEFAULT_EXECUTION) -> list[dict]:
    """Fine-tune every model on every task over every seed (on Dask workers when configured)."""
    spec, cfg, layout = _prepare(spec)
    unless_cancelled(configured(models_task, execution, layout.root)(spec))  # the models, recorded in the UI
    from domainbert.finetune.jobs import overlap_lines, run_list

    # said once here: each run's worker reads its task again and says it at DEBUG (finetune_task)
    for line in overlap_lines(cfg):
        get_run_logger().warning(line)
    if recipe.searched_tasks(cfg):  # each task's recipe chosen on the reference before any model trains at it
        chosen = unless_cancelled(configured(recipe_task, execution, layout.root)(spec))
        cfg = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update=chosen)})
        spec = _with_recipe(spec, cfg)
    jobs = run_list(cfg, layout)
    get_run_logger().info(
        "fine-tuning %d run(s) over %d task(s), a floor baseline per task included", len(jobs), len(cfg.finetune.tasks)
    )
    # One at a time locally (each run already uses every core); spread over workers on a Dask cluster.
    with task_runner(execution, threads=1) as runner:
        futures = []
        for job in jobs:
            run = configured(
                finetune_task, execution, layout.root, refresh=not caching.finetune_state(cfg, layout, job).current
            )
            futures.append(runner.submit(run, {"spec": spec, **dataclasses.asdict(job)}))
        results = results_or_stop(futures, "while fine-tuning")
    from domainbert.finetune.ner import repair_lines

    for line in repair_lines(results):  # one line a task; each run's count is a DEBUG line (--verbose)
        get_run_logger().info(line)
    return results


@flow(name="domainbert-report", log_prints=True)
@locked
@cancellable
def report_flow(spec: RunSpec, execution: ExecutionOptions = DEFAULT_EXECUTION) -> str:
    """Render the comparison report and publish it (Markdown + table) as Prefect artifacts."""
    spec, cfg, layout = _prepare(spec)
    return unless_cancelled(configured(report_task, execution, layout.root)(spec))
