"""Graceful stop on SIGTERM and SIGUSR1: a flag the training loops check at step boundaries.

Schedulers (Slurm, Kubernetes, Prefect workers, systemd) send SIGTERM, wait a grace period, then SIGKILL;
Slurm can send SIGUSR1 ahead of the time limit (``--signal=USR1@120``). While ``graceful_stop()`` is active
the first such signal only records a request: pretraining writes a checkpoint at the next step boundary and
raises ``StopRequested``; fine-tuning raises it at the next step (its results are written atomically, so
nothing half-written is left). A second signal raises ``StopRequested`` at once. The CLI and the pretraining
worker exit with ``exit_code(signal)`` = 128 + the signal number (143 for SIGTERM, 138 for SIGUSR1), the
shell's convention for "ended by that signal"; rerunning the same command continues the run.

The flag is process-wide, so a loop running in a worker thread (Prefect's thread pool) sees a signal that
the main thread received. This module does not checkpoint anything itself.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
_requested: int | None = None


class StopRequested(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised at a step boundary after SIGTERM/SIGUSR1; a BaseException so ``except Exception`` passes it on."""

    def __init__(self, signum: int, where: str = "") -> None:
        self.signum = signum
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name}{' ' + where if where else ''}; rerun the same command to continue")


def exit_code(signum: int) -> int:
    return 128 + int(signum)


def stop_requested() -> bool:
    return _requested is not None


def requested_signal() -> int | None:
    return _requested


def check(where: str = "") -> None:
    """Raise ``StopRequested`` if a stop signal arrived."""
    if _requested is not None:
        raise StopRequested(_requested, where)


def reset() -> None:
    """Forget a request (tests; a long-lived process that handled one)."""
    global _requested
    _requested = None


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _requested
    first = _requested is None
    _requested = signum
    if not first:
        raise StopRequested(signum, "(second signal)")


@contextmanager
def graceful_stop() -> Iterator[None]:
    """Turn SIGTERM/SIGUSR1 into a stop request while active; the previous handlers are restored after.

    Outside the main thread handlers cannot be installed; the flag still works when the main thread has
    them (the CLI installs them for the whole command).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
