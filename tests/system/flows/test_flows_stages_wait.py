"""``flows.stages.results_or_stop``: the stage flows' wait for their runs (Prefect's own futures over a real
thread pool, no server needed), with no alarm signal and a stop within a second."""

from __future__ import annotations

import concurrent.futures
import signal
import threading
import time
import uuid

import pytest
from prefect.futures import PrefectConcurrentFuture
from prefect.states import Completed

from domainbert.core import signals
from domainbert.flows.stages import results_or_stop

STEP_S = 2.0


def _futures(pool, seconds: list[float], until_stopped: bool = False) -> list[PrefectConcurrentFuture]:
    def run(i: int, s: float):
        time.sleep(s)
        deadline = time.monotonic() + 30
        while until_stopped and not signals.stop_requested() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(STEP_S if until_stopped else 0)  # a run under way ends at its next step once a stop is requested
        return Completed(data=i * 10)

    return [PrefectConcurrentFuture(uuid.uuid4(), pool.submit(run, i, s)) for i, s in enumerate(seconds)]


def test_the_wait_returns_every_result_in_order_and_never_arms_an_alarm(monkeypatch) -> None:
    """Prefect's ``wait(timeout=...)`` armed SIGALRM in the main thread every second; its handler raised wherever
    that thread was (a garbage collector's callback, a lock under a done callback): tracebacks in healthy runs."""
    armed: list[tuple] = []
    real = signal.setitimer
    monkeypatch.setattr(signal, "setitimer", lambda *a: (armed.append(a), real(*a))[1])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = _futures(pool, [1.6, 0.2, 1.2, 0.0])
        assert results_or_stop(futures, "test") == [0, 10, 20, 30]
        assert results_or_stop([], "test") == [] and results_or_stop(futures, "test") == [0, 10, 20, 30]
    assert armed == []


def test_a_stop_ends_the_wait_within_a_second_and_cancels_the_runs_not_started() -> None:
    signals.reset()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            futures = _futures(pool, [0.0, 0.0, 0.0], until_stopped=True)  # one under way, two queued
            threading.Timer(0.5, signals.note, args=(signal.SIGTERM,)).start()
            t0 = time.monotonic()
            with pytest.raises(signals.StopRequested):
                results_or_stop(futures, "test")
            took = time.monotonic() - t0
        assert took < STEP_S + 2.0  # the stop seen within a second, then the run under way's step
        assert [f.wrapped_future.cancelled() for f in futures] == [False, True, True]
    finally:
        signals.reset()
