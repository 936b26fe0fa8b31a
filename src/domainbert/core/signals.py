"""Stopping on Ctrl-C (SIGINT), SIGTERM and SIGUSR1: at once, or at the next step boundary of a loop that checkpoints.

A terminal sends Ctrl-C's SIGINT to the whole process group; schedulers (Slurm, Kubernetes, Prefect workers,
systemd) send SIGTERM to the command, wait a grace period, then SIGKILL; Slurm can send SIGUSR1 ahead of the
time limit (``--signal=USR1@120``). The CLI installs the handlers for the whole command (``stoppable``): a
signal raises ``StopRequested`` where the command is, which is safe because every output is written
complete-or-absent. A loop with steps worth keeping (pretraining, the fine-tuning worker, a launcher waiting on
its training processes) runs under ``graceful_stop()``: there the first signal only records a request,
pretraining writes a checkpoint at the next step boundary and raises ``StopRequested``, fine-tuning raises it
at the next step. A second signal raises at once. The CLI and the training workers exit with
``exit_code(signal)`` = 128 + the signal number (130 for SIGINT, 143 for SIGTERM, 138 for SIGUSR1), the
shell's convention for "ended by that signal"; rerunning the same command continues the run.

The flag is process-wide, so a loop running in a worker thread (Prefect's thread pool) sees a signal that
the main thread received. Other processes of the same command (local Dask workers running fine-tuning, the
launchers' training processes) do not receive the signal a scheduler sends to the command alone, so the
first signal is also written to a stop file that every process started from the command checks: its path
travels in ``DOMAINBERT_STOP_FILE``, set by the outermost handler scope and removed when it ends.
This module does not checkpoint anything itself.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
STOP_FILE_ENV = "DOMAINBERT_STOP_FILE"
_requested: int | None = None
_defer: list[bool] = []  # the open handler scopes, innermost last: whether a first signal is only recorded


class StopRequested(BaseException):  # noqa: N818 - a control-flow signal, like KeyboardInterrupt
    """Raised after SIGINT/SIGTERM/SIGUSR1 (at a step boundary under ``graceful_stop``); a BaseException so
    ``except Exception`` passes it on."""

    def __init__(self, signum: int, where: str = "") -> None:
        self.signum = signum
        self.where = where
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


def note(signum: int) -> None:
    """Record a stop by ``signum`` that this process learnt of otherwise (Prefect's flow engine turns SIGTERM
    into its own exception, Python SIGINT into ``KeyboardInterrupt``), and tell the command's other processes."""
    global _requested
    if _requested is None:
        _requested = int(signum)
        tell_other_processes(signum)


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _requested
    first = _requested is None
    if first:  # the first signal is the one the command's other processes and the stop line report
        _requested = signum
        tell_other_processes(signum)
    if not first or not (_defer and _defer[-1]):
        raise StopRequested(signum, "(second signal)" if not first else "")


def handling() -> bool:
    """Whether a ``stoppable``/``graceful_stop`` scope is open in this process (its handlers installed)."""
    return bool(_defer)


def deliver(signum: int) -> None:
    """Handle ``signum`` as the open scope's handler would (record it, or raise ``StopRequested``): for a signal
    another handler caught first (Prefect's SIGTERM bridge while its flow engine runs)."""
    _handler(signum, None)


@contextmanager
def _handlers(defer: bool) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        if not defer:  # no handlers here, but a run that begins after a stop must not start (a queued task)
            check()
        yield
        return
    owner = STOP_FILE_ENV not in os.environ  # the outermost one names the file; nested ones and children share it
    if owner:
        os.environ[STOP_FILE_ENV] = str(
            Path(tempfile.gettempdir()) / f"domainbert-stop-{os.getpid()}-{uuid.uuid4().hex}"
        )
    previous = {sig: signal.signal(sig, _handler) for sig in STOP_SIGNALS}
    _defer.append(defer)
    try:
        if not defer:
            check()  # a stop recorded while it could not be raised (a flow's engine code) is raised on entry
        yield
    finally:
        _defer.pop()
        for sig, old in previous.items():
            signal.signal(sig, old)
        if owner:
            Path(os.environ.pop(STOP_FILE_ENV)).unlink(missing_ok=True)


def stoppable() -> AbstractContextManager[None]:
    """Turn SIGINT/SIGTERM/SIGUSR1 into ``StopRequested`` raised at once (in the main thread) while active,
    unless a ``graceful_stop()`` opened inside it; the previous handlers are restored after. Entered after a
    stop (in any thread: a task a thread pool or a Dask worker takes from its queue), it raises at once."""
    return _handlers(defer=False)


def graceful_stop() -> AbstractContextManager[None]:
    """Turn SIGINT/SIGTERM/SIGUSR1 into a stop request while active, unless a ``stoppable()`` opened inside it:
    the loop raises ``StopRequested`` at its next step boundary (``check``); a second signal raises at once.
    Previous handlers are restored after.

    Outside the main thread handlers cannot be installed; the flag still works when the main thread has
    them (the CLI installs them for the whole command).
    """
    return _handlers(defer=True)
