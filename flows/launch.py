"""Stream a launched trainer's output into the Prefect log.

When ``pretrain.launch.launcher`` is ``deepspeed`` or ``torchrun`` the pretraining stage starts the training
processes itself (``domainbert.pretrain.launch``) with their output teed to ``<arm>/launch.log``. The
pretraining task follows that file while the stage runs and forwards each new line to the Prefect run
log, so a GPU run's progress shows in the UI. A retried task launches again and the stage resumes from its
newest checkpoint; the follower starts at the file's current end so earlier attempts are not repeated.
What this leaves out: building and running the launch command (the pretrain stage owns both).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LAUNCH_LOG = "launch.log"


class LogFollower(threading.Thread):
    """Forward lines appended to ``path`` (which may not exist yet) to ``logger`` until stopped."""

    def __init__(self, path: Path, logger: logging.Logger | logging.LoggerAdapter, poll_s: float = 0.5) -> None:
        super().__init__(name=f"follow-{path.name}", daemon=True)
        self.path = path
        self.logger = logger
        self.poll_s = poll_s
        self.offset = path.stat().st_size if path.is_file() else 0
        self.lines = 0
        self._stop_event = threading.Event()
        self._partial = b""

    def _drain(self) -> None:
        if not self.path.is_file():
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                self.lines += 1
                self.logger.info("%s", line)

    def run(self) -> None:
        while not self._stop_event.wait(self.poll_s):
            self._drain()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)
        self._drain()
        if self._partial.strip():
            self.logger.info("%s", self._partial.decode("utf-8", errors="replace").rstrip())
            self._partial = b""


@contextmanager
def follow_log(path: Path, logger: logging.Logger | logging.LoggerAdapter) -> Iterator[LogFollower]:
    """Forward lines appended to ``path`` while the block runs (and the rest when it ends)."""
    follower = LogFollower(path, logger)
    follower.start()
    try:
        yield follower
    finally:
        follower.stop()
