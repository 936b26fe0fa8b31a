"""Watching long work where people watch it (a terminal, a Prefect worker's log, a Slurm output file, ``tail -f``).

- ``ProgressLine`` decides when a long loop (pretraining, the base warm-up, fine-tuning, the corpus's input
  shards) logs a progress line: on the first step, then every ``DOMAINBERT_PROGRESS_SECONDS`` seconds (default
  30) and, if set, every ``DOMAINBERT_PROGRESS_STEPS`` steps, and on the last step; it also gives the rate and
  the ETA. It is the package's one progress display: a log line reads the same in a terminal and in a log file
  (no bar is drawn; the bars of transformers and datasets are theirs).
- ``tagged(template)`` decorates a function so that every log record emitted while it runs, in its thread or
  task (a ``contextvars`` variable), starts with ``[<template filled from its arguments>]``: fine-tuning runs
  tag their lines ``[model/task/seed-N]`` so that parallel workers' lines can be told apart.

A progress line's record also carries ``progress = (step, total, label)`` (``extra``), so a log handler can
follow the run without parsing text (the Prefect flows turn it into a progress artifact per run).
Neither changes what is trained or written; this module does nothing else.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
_tag: contextvars.ContextVar[str | None] = contextvars.ContextVar("domainbert_log_tag", default=None)


def _env_number(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


class ProgressLine:
    """When to log a progress line, and the rate and ETA since the loop (re)started.

    Args:
        total: steps of the whole run; None while unknown (no last step, no ETA; set it once known).
        initial: the step the loop starts from (a resumed run).
        every_s: seconds between lines (default ``DOMAINBERT_PROGRESS_SECONDS`` or 30; 0: every step).
        every_steps: also a line every this many steps (default ``DOMAINBERT_PROGRESS_STEPS`` or 0: off).
    """

    def __init__(
        self, total: int | None, initial: int = 0, *, every_s: float | None = None, every_steps: int | None = None
    ) -> None:
        self.total, self.initial = total, initial
        self.every_s = _env_number("DOMAINBERT_PROGRESS_SECONDS", 30.0) if every_s is None else every_s
        self.every_steps = int(_env_number("DOMAINBERT_PROGRESS_STEPS", 0) if every_steps is None else every_steps)
        self.start = self.last = time.monotonic()
        self.lines = 0

    def due(self, step: int) -> bool:
        """Whether ``step`` (just finished) gets a line; records it when so."""
        now = time.monotonic()
        due = (
            self.lines == 0
            or (self.total is not None and step >= self.total)
            or now - self.last >= self.every_s
            or (self.every_steps > 0 and step % self.every_steps == 0)
        )
        if due:
            self.last, self.lines = now, self.lines + 1
        return due

    def elapsed(self) -> float:
        return max(time.monotonic() - self.start, 1e-9)

    def eta_s(self, step: int) -> float | None:
        done = step - self.initial
        if self.total is None or done <= 0:
            return None
        return (self.total - step) * self.elapsed() / done


def duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def tagged(template: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: records logged while the function runs start with ``[template]``, filled from its arguments
    (``str.format`` with the bound arguments, defaults included)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            token = _tag.set(template.format(**bound.arguments))
            try:
                return fn(*args, **kwargs)
            finally:
                _tag.reset(token)

        return inner

    return wrap


def current_tag() -> str | None:
    return _tag.get()


_factory = logging.getLogRecordFactory()


def _tagging_factory(*args: object, **kwargs: object) -> logging.LogRecord:
    # the LogRecord arguments (name, level, pathname, ...) pass through unchanged to the previous factory
    record = _factory(*args, **kwargs)
    tag = _tag.get()
    if tag and isinstance(record.msg, str):
        record.msg = f"[{tag.replace('%', '%%') if record.args else tag}] {record.msg}"
    return record


if getattr(logging.getLogRecordFactory(), "__name__", "") != "_tagging_factory":
    logging.setLogRecordFactory(_tagging_factory)
