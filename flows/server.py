"""The temporary Prefect API server of ``domainbert run``, started in a session of its own.

Without ``PREFECT_API_URL`` Prefect starts a temporary API server as a child process of the command, in the
command's process group. Ctrl-C in a terminal sends SIGINT to the whole group, so that server stopped first,
and the flow, still stopping, met refused connections on every state change and log line, and hung. Here the
server is started before the flow, in its own session (no terminal signal reaches it), the flow is pointed at
it, and it is stopped only after the flow has ended and its logs and events are sent. Its start is stoppable:
a stop while it starts (or recorded just before) stops the command at once, and the server with it; its
drain and stop run under the caller's ``graceful_stop``, so a stop then is recorded, not cut into them. A SIGKILL of the command
skips that stop: the server is also a child the kernel kills when the command dies
(``core.processes.die_with_parent``), so it never runs on with no parent. Its telemetry service is off unless
the user set ``PREFECT_SERVER_ANALYTICS_ENABLED`` (offline it logged an ERROR line into the run's output).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any
from unittest import mock

from prefect.server.api import server as prefect_server
from prefect.settings import PREFECT_API_URL, temporary_settings

from domainbert.core import signals
from domainbert.core.processes import child_of

logger = logging.getLogger(__name__)
DRAIN_S = 5  # logs and events still queued when the flow ends; the server stops after them
STOP_S = 2.0  # given to the server to exit after SIGTERM (Prefect gives 5 s): it usually exits at once
# Prefect waits 20 s for its temporary server by default; on a loaded 2-core machine it took longer, and the run
# died with a traceback before any stage. Unless the user set the setting, the run waits this long.
STARTUP_S = 120
STARTUP_SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
ANALYTICS_SETTING = "PREFECT_SERVER_ANALYTICS_ENABLED"
START_MESSAGE = "Starting temporary server on "


class _OwnSessionServer(prefect_server.SubprocessASGIServer):
    """Prefect's temporary server, its process in a new session and bound to this one's life (its command line
    stays Prefect's own). Start it from a thread that lives as long as the run: the kernel's parent-death
    signal follows the thread that started the child.

    Prefect keeps one server per port in a class-wide table, and a plain ``SubprocessASGIServer()`` returns the
    one already there: a server Prefect started for itself earlier in the process (already running, so ``start``
    does nothing), which this block would then use and stop. Each run's server is its own instance, kept out
    of that table, and its stop removes no one else's entry."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _OwnSessionServer:
        return object.__new__(cls)

    def __init__(self) -> None:
        super().__init__()
        self._instance_key = object()  # type: ignore[assignment]  # a key no table entry has: stop deletes nothing

    def stop(self) -> None:
        """Prefect's stop with ``STOP_S`` between SIGTERM and SIGKILL instead of its 5 s: the run's logs and
        events are already sent (``_drain``), and a server that lets a stopped run wait delays the exit a
        scheduler's grace period is counting. SQLite's journal keeps the history database whole through a kill."""
        process = self.server_process
        if process is not None and process.poll() is None:
            prefect_server.subprocess_server_logger.info(f"Stopping temporary server on {self.address}")
            process.terminate()
            try:
                process.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                logger.debug("the temporary Prefect server did not exit within %s s of SIGTERM; killed", STOP_S)
                process.kill()
                process.wait()
        self.server_process = None
        super().stop()  # the rest of Prefect's bookkeeping; its process is gone

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        bound = functools.partial(_popen_own_session, parent=os.getpid())
        own_session = SimpleNamespace(Popen=bound)
        with mock.patch.object(prefect_server, "subprocess", own_session):
            return super()._run_uvicorn_command()


def _popen_own_session(*args: Any, parent: int, env: dict[str, str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Prefect's server command, in a session of its own, bound to ``parent``'s life. Its telemetry service
    is off unless the user's environment or Prefect profile says otherwise: the server lives for one run, and
    on an offline machine (the default's) the service logs "ERROR ... Failed to send telemetry" in the run's
    output every ten minutes."""
    quiet: dict[str, str] = {ANALYTICS_SETTING: "false", **env}
    return subprocess.Popen(*args, env=quiet, start_new_session=True, preexec_fn=child_of(parent), **kwargs)  # type: ignore[call-overload]


class _FirstLineOnly(logging.Filter):
    """Keeps the first line of Prefect's "Starting temporary server on ..." message: its second line, Prefect's
    advice to run a dedicated server (docs/cluster.md says how), printed without a timestamp in every run's
    output."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(START_MESSAGE) and "\n" in message:  # the logger's other messages as they are
            record.msg, record.args = message.split("\n", 1)[0], None
        return True


def _drain() -> None:
    """Send the log lines and events the flow left queued, while the server still answers."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=DRAIN_S)
        except Exception:  # noqa: BLE001 - a log line that cannot be sent must not change the run's outcome
            logger.debug("could not drain %s", worker.__name__, exc_info=True)


@contextmanager
def _filtered(target: logging.Logger, log_filter: logging.Filter) -> Iterator[None]:
    target.addFilter(log_filter)
    try:
        yield
    finally:
        target.removeFilter(log_filter)


@contextmanager
def api_for_the_run() -> Iterator[None]:
    """The API the run's flows report to: ``PREFECT_API_URL`` when set, else a temporary server of its own
    session, stopped after the block."""
    if PREFECT_API_URL.value():
        yield
        return
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS as SETTING

    from domainbert.core.errors import DomainbertError

    server = _OwnSessionServer()
    timeout = SETTING.value() if STARTUP_SETTING in os.environ else max(SETTING.value(), STARTUP_S)
    try:
        # Starting takes seconds on a loaded machine: a stop (or one recorded just before) ends it at once.
        with signals.stoppable(), _filtered(prefect_server.subprocess_server_logger, _FirstLineOnly()):
            try:
                server.start(timeout=timeout)
            except RuntimeError as exc:  # Prefect's own "Timed out while attempting to connect ..."
                raise DomainbertError(
                    f"the temporary Prefect server did not answer within {timeout} s ({str(exc)[:200]}); on a "
                    f"busy machine set {STARTUP_SETTING} higher, or point PREFECT_API_URL at a running server"
                ) from None
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield
            finally:
                _drain()
    finally:
        server.stop()
