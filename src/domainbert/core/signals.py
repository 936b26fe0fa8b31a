"""Graceful stop on SIGTERM and SIGUSR1: a flag the training loops check at step boundaries.

Schedulers (Slurm, Kubernetes, Prefect workers, systemd) send SIGTERM, wait a grace period, then SIGKILL;
Slurm can send SIGUSR1 ahead of the time limit (``--signal=USR1@120``). While ``graceful_stop()`` is active
the first such signal only records a request: pretraining writes a checkpoint at the next step boundary and
raises ``StopRequested``; fine-tuning raises it at the next step (its results are written atomically, so
nothing half-written is left). A second signal raises ``StopRequested`` at once. The CLI and the pretraining
worker exit with ``exit_code(signal)`` = 128 + the signal number (143 for SIGTERM, 138 for SIGUSR1), the
shell's convention for "ended by that signal"; rerunning the same command continues the run.

The flag is process-wide, so a loop running in a worker thread (Prefect's thread pool) sees a signal that
the main thread received. Other processes of the same command (local Dask workers running fine-tuning, the
launchers' training processes) do not receive the signal a scheduler sends to the command alone, so the
first signal is also written to a stop file that every process started from the command checks: its path
travels in ``DOMAINBERT_STOP_FILE``, set by the outermost ``graceful_stop()`` and removed when it ends.
This module does not checkpoint anything itself.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
STOP_FILE_ENV = "DOMAINBERT_STOP_FILE"
_requested: int | None = None


class StopRequested(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised at a step boundary after SIGTERM/SIGUSR1; a BaseException so ``except Exception`` passes it on."""

    def __init__(self, signum: int, where: str = "") -> None:
        self.signum = signum
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name}{' ' + where if where else ''}; rerun the same command to continue")


def exit_code(signum: int) -> int:
    return 128 + int(signum)


def _file_signal() -> int | None:
    """The signal another process of this command wrote to the stop file, or None (no file, no variable)."""
    path = os.environ.get(STOP_FILE_ENV)
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else int(signal.SIGTERM)


def stop_requested() -> bool:
    return requested_signal() is not None


def requested_signal() -> int | None:
    return _requested if _requested is not None else _file_signal()


def check(where: str = "") -> None:
    """Raise ``StopRequested`` if a stop signal arrived (in this process or, by the stop file, another of the
    command's)."""
    signum = requested_signal()
    if signum is not None:
        raise StopRequested(signum, where)


def reset() -> None:
    """Forget a request (tests; a long-lived process that handled one)."""
    global _requested
    _requested = None
    path = os.environ.get(STOP_FILE_ENV)
    if path:
        Path(path).unlink(missing_ok=True)


def tell_other_processes(signum: int) -> None:
    """Write the stop file, so the command's other processes stop at their next step. For a signal this
    process learnt of otherwise (Prefect's flow engine turns SIGTERM into its own exception first)."""
    path = os.environ.get(STOP_FILE_ENV)
    if path:
        try:
            Path(path).write_text(str(int(signum)), encoding="ascii")
        except OSError:
            pass


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _requested
    first = _requested is None
    _requested = signum
    if not first:
        raise StopRequested(signum, "(second signal)")
    tell_other_processes(signum)


@contextmanager
def graceful_stop() -> Iterator[None]:
    """Turn SIGTERM/SIGUSR1 into a stop request while active; the previous handlers are restored after.

    Outside the main thread handlers cannot be installed; the flag still works when the main thread has
    them (the CLI installs them for the whole command).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = STOP_FILE_ENV not in os.environ  # the outermost one names the file; nested ones and children share it
    if owner:
        os.environ[STOP_FILE_ENV] = str(
            Path(tempfile.gettempdir()) / f"domainbert-stop-{os.getpid()}-{uuid.uuid4().hex}"
        )
    previous = {sig: signal.signal(sig, _handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if owner:
            Path(os.environ.pop(STOP_FILE_ENV)).unlink(missing_ok=True)
