"""A user error inside a stage is the command's one line, not Prefect's tracebacks.

A ``DomainbertError`` (a config field, a data file, a model folder: ``core.errors``) raised in a stage's task
ends that task run and every flow run around it Failed. Prefect's engines log each ending at ERROR: the task
engine "Finished in state Failed('Task run encountered an exception DataError: ...')", and each flow engine
"Encountered exception during execution" with the whole traceback, once per flow level (the stage's subflow and
``domain-pipeline``), about 150 lines before the CLI prints its one ``error:`` line and exits 2.
``UserErrorIsNotACrash`` drops those lines (``--verbose`` keeps them, at DEBUG, traceback and all); the runs'
Failed states, in the Prefect UI too, still say the error. Any other exception is logged as Prefect logs it.
This module only filters log lines.
"""

from __future__ import annotations

import logging
import os
import re

from domainbert.core.errors import DomainbertError
from domainbert.core.logs import VERBOSE_ENV

LOGGERS = ("prefect.task_runs", "prefect.flow_runs")
# the task engine's final state names the exception's class: "... encountered an exception DataError: ..."
_FAILED_WITH = re.compile(r"^Finished in state Failed\('Task run encountered an exception (\w+): ")


def _user_error_names() -> set[str]:
    found, todo = set(), [DomainbertError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found


class UserErrorIsNotACrash(logging.Filter):
    """Drops Prefect's ERROR lines about a ``DomainbertError`` (the flow engine's exception with its traceback,
    the task engine's Failed state), or under ``--verbose`` lowers them to DEBUG; the CLI says the error once."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and _about_a_user_error(record):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return bool(os.environ.get(VERBOSE_ENV))
        return True


def _about_a_user_error(record: logging.LogRecord) -> bool:
    if record.exc_info and isinstance(record.exc_info[1], DomainbertError):
        return True
    named = _FAILED_WITH.match(str(record.msg))
    return bool(named and named.group(1) in _user_error_names())


def quiet_user_errors() -> None:
    """Install ``UserErrorIsNotACrash`` on Prefect's task-run and flow-run loggers (once per process)."""
    for name in LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(f, UserErrorIsNotACrash) for f in target.filters):
            target.addFilter(UserErrorIsNotACrash())
