"""Running a launcher (torchrun, deepspeed) as a child process with its output teed to a log file.

The pretraining and fine-tuning launchers build their commands; this module only runs them. A training
process that stopped on a user error (a corrupt model, a bad data file) printed it after ``USER_ERROR_MARK``;
it is raised again here as a ``DomainbertError``, which the flows do not retry, where any other failure is a
``RuntimeError`` that they do.
"""

from __future__ import annotations

import logging
import os
import subprocess
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
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, check=False)
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
