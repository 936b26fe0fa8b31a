"""``flows.server.api_for_the_run``: the temporary Prefect server gets time to start on a busy machine, and one
that never answers ends the command in one line naming the setting, not in Prefect's traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from domainbert.core.errors import DomainbertError
from domainbert.flows import server


@pytest.fixture
def silent_server(monkeypatch):
    """A server process that never answers its health check (a real process, stopped by the server's stop)."""
    started: list[subprocess.Popen] = []
    held = socket.socket()  # bound, never listening: its port refuses every connection and no server can take it
    held.bind(("127.0.0.1", 0))

    def never_answers(self):
        self.port = held.getsockname()[1]  # where the health check will ask
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        started.append(proc)
        return proc

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(server._OwnSessionServer, "_run_uvicorn_command", never_answers)
    yield started
    held.close()
    for proc in started:
        proc.kill()


def test_a_server_that_never_answers_is_one_line_naming_the_setting(monkeypatch, silent_server) -> None:
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    monkeypatch.setenv(server.STARTUP_SETTING, "1")  # the user's own setting is kept
    # an earlier test in this worker may have left PREFECT_API_URL in Prefect's settings: the run's own server only
    with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 1}, restore_defaults={PREFECT_API_URL}):
        with pytest.raises(DomainbertError) as err:
            with server.api_for_the_run():
                pytest.fail("the block ran without a server")
    message = str(err.value)
    assert "within 1 s" in message and server.STARTUP_SETTING in message and "\n" not in message
    assert silent_server[0].wait(timeout=10) is not None  # stopped, not left running


def test_a_server_prefect_already_runs_in_the_process_is_neither_used_nor_stopped(monkeypatch, silent_server) -> None:
    """Prefect keeps one temporary server per port in a class-wide table; the run starts its own all the same."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    prefects_own = object.__new__(server.prefect_server.SubprocessASGIServer)
    prefects_own.__init__()
    prefects_own.running = True  # as after Prefect started it for a flow run earlier in this process
    stopped: list[object] = []
    monkeypatch.setattr(prefects_own, "stop", lambda: stopped.append(prefects_own))
    monkeypatch.setitem(server.prefect_server.SubprocessASGIServer._instances, None, prefects_own)
    monkeypatch.setenv(server.STARTUP_SETTING, "1")

    quick = {PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 1}
    with temporary_settings(updates=quick, restore_defaults={PREFECT_API_URL}), pytest.raises(DomainbertError):
        with server.api_for_the_run():
            pytest.fail("the block ran on a server it did not start")
    assert len(silent_server) == 1  # it started its own
    assert stopped == [] and server.prefect_server.SubprocessASGIServer._instances[None] is prefects_own


def test_without_the_setting_the_run_waits_longer_than_prefects_20_s(monkeypatch) -> None:
    asked: list[float] = []

    def start(self, timeout=None):
        asked.append(timeout)
        raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")

    monkeypatch.delenv(server.STARTUP_SETTING, raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(server._OwnSessionServer, "start", start)
    monkeypatch.setattr(server._OwnSessionServer, "stop", lambda self: None)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(restore_defaults={PREFECT_API_URL}), pytest.raises(DomainbertError):
        with server.api_for_the_run():
            pass
    assert asked == [server.STARTUP_S]


SERVERS_SETTING = """
from domainbert.flows import server
own = server._OwnSessionServer()
own.start(timeout=120)
try:
    raw = open(f"/proc/{own.server_process.pid}/environ", "rb").read()
finally:
    own.stop()
print(dict(item.decode().partition("=")[::2] for item in raw.split(b"\\0") if item).get(server.ANALYTICS_SETTING))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's environment from /proc")
@pytest.mark.parametrize(("users", "expected"), [(None, "false"), ("true", "true")])
def test_the_temporary_servers_telemetry_is_off_unless_the_user_turned_it_on(users, expected) -> None:
    """Offline (the default), Prefect's telemetry service logs an ERROR line in the run's output; the server
    lives for one run, so it starts with the service off, and a user's own setting is kept. In a process of
    its own: Prefect reads its settings once, and the suite's conftest sets this one."""
    env = {k: v for k, v in os.environ.items() if k not in (server.ANALYTICS_SETTING, "PREFECT_API_URL")}
    if users is not None:
        env[server.ANALYTICS_SETTING] = users
    done = subprocess.run([sys.executable, "-c", SERVERS_SETTING], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1].lower() == expected


def test_a_server_that_ignores_sigterm_is_killed_after_stop_s_not_prefects_5(monkeypatch) -> None:
    """A stopped run waits ``STOP_S`` for its server, then kills it; a server that exits on SIGTERM is not
    killed."""
    import signal
    import time

    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
    exits = "import time; print(flush=True); time.sleep(60)"
    for code, expected in ((ignores, -signal.SIGKILL), (exits, -signal.SIGTERM)):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline()  # its handler is in place
        own = server._OwnSessionServer()
        own.server_process = proc
        began = time.monotonic()
        own.stop()
        took = time.monotonic() - began
        assert proc.returncode == expected and own.server_process is None and not own.running
        if expected == -signal.SIGKILL:
            assert server.STOP_S <= took < 5, took  # Prefect's own stop waits 5 s


def test_the_start_message_is_one_line_with_its_timestamp(monkeypatch, silent_server) -> None:
    """Prefect's "Starting temporary server on ..." carries a second line of advice, which the run's log format
    printed without a timestamp; the run's server logs the first line only, and other messages are untouched."""
    import logging

    from prefect.server.api.server import subprocess_server_logger
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    records: list[logging.LogRecord] = []
    catch = logging.Handler()
    catch.emit = records.append  # type: ignore[method-assign]
    subprocess_server_logger.addHandler(catch)
    monkeypatch.setattr(subprocess_server_logger, "disabled", False)
    level = subprocess_server_logger.level
    subprocess_server_logger.setLevel(logging.INFO)  # a test session's may be higher
    monkeypatch.setenv(server.STARTUP_SETTING, "1")
    try:
        with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 1},
                                restore_defaults={PREFECT_API_URL}):
            with pytest.raises(DomainbertError):
                with server.api_for_the_run():
                    pytest.fail("the block ran without a server")
        subprocess_server_logger.info("two\nlines")  # after the run's server: Prefect's own messages as they are
    finally:
        subprocess_server_logger.removeHandler(catch)
        subprocess_server_logger.setLevel(level)
    started = [r.getMessage() for r in records if r.getMessage().startswith("Starting temporary server on ")]
    assert len(started) == 1 and "\n" not in started[0] and "127.0.0.1" in started[0], started
    assert records[-1].getMessage() == "two\nlines"
    other = logging.LogRecord("prefect", logging.INFO, __file__, 1, "an error\nwith its detail", None, None)
    assert server._FirstLineOnly().filter(other) and other.getMessage() == "an error\nwith its detail"
