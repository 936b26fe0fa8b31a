"""The local Dask cluster of ``domainbert run --workers N``: how its worker processes start, and how they end.

They start ignoring Ctrl-C (the command stops them itself), with glibc's own memory thresholds and without
Dask's profiler (``LOCAL_WORKER_CONFIG``); once started, each gets ``ExitWithoutTeardown``. When the runner
closes, each worker is given ``WORKER_EXIT_S`` to exit before distributed would kill it. A Dask cluster at an
address (``execution.dask_address``) is someone else's: nothing here touches it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

WORKER_EXIT_S = 30.0  # the time a local worker process is given to exit when the runner closes

# distributed's defaults for a worker process that cost a training run its time (
# bench/results/demo_time_cpu_2026-11.md, measured how much): glibc told to give back any free memory over 64 KiB at the top of the
# heap, which also fixes the threshold above which each allocation is a fresh mmap at 128 KiB, so every tensor
# of a run beyond that size was mapped, touched page by page and unmapped again; and the statistical profiler
# sampling the worker's threads every 10 ms, for a dashboard the local cluster is started without.
LOCAL_WORKER_CONFIG = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,  # None: not set; glibc's own thresholds
    "distributed.worker.profile.enabled": False,
}


def runner(n_workers: int) -> Any:
    """Prefect's Dask task runner on a local cluster of ``n_workers`` processes of one thread each."""
    from prefect.client.orchestration import get_client
    from prefect_dask import DaskTaskRunner

    # Worker processes must reach the same Prefect API (with the embedded API there is no PREFECT_API_URL
    # in the environment, and each worker would start an API of its own).
    env = {"PREFECT_API_URL": str(get_client(sync_client=True).api_url).rstrip("/")}
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": n_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
            "env": env,
        }
    )


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Where a local cluster is started: Ctrl-C ignored and ``LOCAL_WORKER_CONFIG`` in force, so that each
    nanny hands both to its worker processes when it creates them."""
    with _ctrl_c_ignored(), _worker_settings():
        yield


def start(client: Any) -> None:
    """Give every worker of the client's cluster, present and future, ``ExitWithoutTeardown``."""
    client.register_plugin(ExitWithoutTeardown())


class ExitWithoutTeardown(WorkerPlugin):  # type: ignore[misc]  # distributed is untyped
    """A closed worker's process runs its exit handlers (``atexit``, and so multiprocessing's finalizers and
    logging's flush) and then ends with ``os._exit``, without the interpreter's teardown: in a process that
    has imported torch, transformers and datasets, clearing every module and collecting their objects is
    seconds of work (bench/results/worker_exit_cpu_2026-12.md) that a stopped run waits for and nobody needs."""

    name = "domainbert-exit-without-teardown"

    def teardown(self, worker: Any) -> None:
        atexit.register(_exit_after_handlers)  # registered last, so called first: it runs the others itself


def _exit_after_handlers() -> None:
    atexit.unregister(_exit_after_handlers)  # else the call below would call this again
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def close(client: Any) -> None:
    """Close each local Dask worker with ``WORKER_EXIT_S`` to exit, before the cluster closes them itself.

    distributed gives a worker process 4 s (0.8 of its nanny's 5) and then kills it, logging "Worker process
    still alive after 4.0 seconds, killing" and the worker's failed heartbeat; a worker's exit handlers can
    take longer than that on a busy 2-core machine. Once closed here, the cluster's own close finds nothing
    left to kill. The results the flow's futures still hold are released first: a worker closed with results
    in its memory makes the scheduler warn that it lost "already computed task(s), which will be recomputed
    elsewhere", about results every task's caller has already read."""
    import asyncio

    from distributed import Future

    cluster = getattr(client, "cluster", None)
    if cluster is None:
        return
    with contextlib.suppress(Exception):
        held: list[Future[Any]] = [Future(key, client) for key in list(client.futures)]
        if held:
            client.cancel(held, force=True)

    async def close_all() -> None:
        await asyncio.gather(*(worker.close(timeout=WORKER_EXIT_S) for worker in list(cluster.workers.values())))

    with contextlib.suppress(Exception):  # a cluster already closing: its own close does the rest
        client.sync(close_all)


@contextlib.contextmanager
def _worker_settings() -> Iterator[None]:
    import dask
    import distributed  # noqa: F401 - its defaults loaded first: leaving the context must restore them, not drop them

    with dask.config.set(LOCAL_WORKER_CONFIG):
        yield


@contextlib.contextmanager
def _ctrl_c_ignored() -> Iterator[None]:
    """SIGINT ignored while a local Dask cluster starts, so that its nanny and worker processes inherit the
    ignore: Ctrl-C reaches the terminal's whole process group, and Dask's processes would die of it, printing
    their tracebacks, where this command stops them itself (and their runs stop at the next step through the
    stop file). A Ctrl-C during those seconds of start-up is lost: the next one stops the command."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
