"""Shared test setup: offline, quiet, small. Tests write only under tmp_path."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

# Set before transformers/datasets/prefect are imported by any test module.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# Prefect's home (its ephemeral server's database) per test process: parallel test processes (pytest-xdist)
# never share one SQLite file, and nothing is left in the user's ~/.prefect.
if "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="domainbert-tests-prefect-")
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], True)


import pytest  # noqa: E402 - after the environment above


@pytest.fixture(scope="session", autouse=True)
def _machine_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This machine's cache (``core.paths.machine_cache``: langid tables, the warmed-up base) under the session's
    temporary folder: tests never write to the user's cache, and share one cache among themselves."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("machine-cache"))


@pytest.fixture(scope="session", autouse=True)
def _stop_prefect_temporary_server():
    """Stop Prefect's temporary API server (started by flows run in this process) while the session's output is
    still open: stopped at exit instead, it logs "Stopping temporary server" to a stream pytest has closed."""
    yield
    if "prefect.server.api.server" in sys.modules:
        from prefect.server.api.server import SubprocessASGIServer

        for server in list(SubprocessASGIServer._instances.values()):
            server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The documented commands this session ran (tests/test_documented_commands.py): exit code and time of each,
    or why it was not run, the table a release note quotes."""
    rows: dict[str, dict] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            row = dict(getattr(report, "user_properties", ())).get("documented_command")
            if row and getattr(report, "when", "call") in ("call", "setup"):
                rows[row["command"]] = {**rows.get(row["command"], {}), **row}
    if not rows:
        return
    terminalreporter.write_sep("-", "documented commands: exit code, seconds (or why not run)")
    for command, row in rows.items():
        if "exit" in row:
            terminalreporter.write_line(f"{row['exit']:>4} {row['seconds']:>8.1f} s  {command}")
        else:
            terminalreporter.write_line(f"   -        -    {command}  [{row['kind']}: {row['reason']}]")
