"""Running a launcher (torchrun, deepspeed) as a child process with its output teed to a log file.

The pretraining and fine-tuning launchers build their commands; this module only runs them. A training
process that stopped on a user error (a corrupt model, a bad data file) printed it after ``USER_ERROR_MARK``;
it is raised again here as a ``DomainbertError``, which the flows do not retry, where any other failure is a
``RuntimeError`` that they do.

Nothing outlives the process that started it: a SIGKILL (the OOM killer, a node agent, ``kill -9``) gives the
command no chance to stop its children, so every child this package starts (launchers, the corpus stage's
workers, the flows' temporary Prefect server) asks the kernel, with ``die_with_parent``, to be killed when its
parent dies (Linux's ``PR_SET_PDEATHSIG``; elsewhere a no-op). The kernel watches the parent *thread*, so a
child must be started from a thread that lives as long as it: the thread that waits for it.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from domainbert.core import signals
from domainbert.core.errors import USER_ERROR_MARK, DomainbertError

log = logging.getLogger(__name__)


def run_command(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` with output teed to ``log_path``; a non-zero exit raises RuntimeError with the log's tail."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log.info("launching: %s", " ".join(cmd))
    full_env = {**os.environ, **(env or {})}
    # A stop while the training processes run is theirs to handle (they checkpoint first): this process only
    # records it and waits, where a stop raised here would kill them mid-checkpoint.
    with open(log_path, "ab") as out, signals.graceful_stop():
        start = out.tell()
        proc = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, check=False, preexec_fn=child_of(os.getpid())
        )
    signals.check("(the training processes stopped)")
    if proc.returncode != 0:
        with open(log_path, "rb") as f:
            f.seek(start)
            written = f.read().decode(errors="replace")
        user = [line.split(USER_ERROR_MARK, 1)[1] for line in written.splitlines() if USER_ERROR_MARK in line]
        if user:
            raise DomainbertError(user[0].strip())
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"training processes failed (exit {proc.returncode}); log {log_path}:\n{tail}")


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` (the process that started it) dies.

    Called first thing in a child: a process pool's initializer, or between fork and exec. A parent that
    died before the call is caught by comparing ``getppid()`` with ``parent`` (an orphan's parent is init or
    a subreaper), so the child never runs on unwatched."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            log.warning("PR_SET_PDEATHSIG refused (errno %d): this process may outlive its parent", ctypes.get_errno())
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def child_of(parent: int) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess``: the child dies with ``parent`` (see ``die_with_parent``)."""
    return functools.partial(die_with_parent, parent)
