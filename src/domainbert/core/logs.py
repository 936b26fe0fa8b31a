"""The one log line format of every domainbert process, the same as Prefect's console lines.

A run's log interleaves lines from three kinds of process: the command itself (``cli.main``), Prefect's Dask
workers (Prefect's own console handler) and the launched training workers (``finetune/worker.py``,
``pretrain/worker.py``). All of them print ``HH:MM:SS.mmm | LEVEL   | logger - message``, Prefect's "standard"
format, so that one run reads as one log. This module only formats: which loggers are quiet is
``core.models.quiet_libraries``'s business.
"""

from __future__ import annotations

import logging
import os

LOG_FORMAT = "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s"
LOG_DATEFMT = "%H:%M:%S"
VERBOSE_ENV = "DOMAINBERT_VERBOSE"  # set by ``domainbert --verbose``; inherited by the command's processes


def configure(level: int | str = logging.INFO, *, prefix: str = "") -> None:
    """The root logger at ``level`` with the one format; ``prefix`` goes before the logger's name (a training
    worker's rank)."""
    logging.basicConfig(level=level, format=LOG_FORMAT.replace("%(name)s", prefix + "%(name)s"), datefmt=LOG_DATEFMT)
    if os.environ.get(VERBOSE_ENV):
        show_debug()


def show_debug() -> None:
    """domainbert's own DEBUG lines on (``--verbose``); other libraries keep their levels."""
    logging.getLogger("domainbert").setLevel(logging.DEBUG)
