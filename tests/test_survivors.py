"""Nothing outlives its parent: after a SIGKILL of a command (the OOM killer, a node agent, ``kill -9``) none
of the processes it started runs on, neither the corpus stage's workers nor Prefect's temporary server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

DOMAINBERT = str(Path(sys.executable).with_name("domainbert"))


def session_processes(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid`` (a command started with ``start_new_session``), zombies left out."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def kill_and_count_survivors(proc: subprocess.Popen, within: float = 10.0) -> list[str]:
    """SIGKILL ``proc`` alone (not its group), wait up to ``within`` seconds for the processes of its session
    to end, and return the command lines of those still running (killed afterwards, so nothing leaks)."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + within
    while (left := session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = []
    for p in left:
        try:
            lines.append(" ".join(p.cmdline())[:160])
            p.kill()
        except psutil.Error:
            pass
    return lines


def start_and_wait(cmd: list[str], env: dict[str, str], ready: Callable[[subprocess.Popen], bool], timeout: float = 240) -> subprocess.Popen:
    """Start ``cmd`` in a session of its own and return once ``ready()`` holds (or fail with its output)."""
    log = open(Path(env["PREFECT_HOME"]) / "command.log", "w+")  # noqa: SIM115 - read back on failure
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not ready(proc):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.seek(0)
            pytest.fail(f"never got ready (exit {proc.returncode}):\n{log.read()[-3000:]}")
        time.sleep(0.1)
    return proc


def command_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "prefect-home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    return env


def test_corpus_workers_die_with_a_sigkilled_command(tmp_path):
    out = tmp_path / "run"
    cmd = [DOMAINBERT, "corpus", "science", "corpus.shard_documents=500", "corpus.workers=2", "--out", str(out)]
    # Two input shards done: both workers are up and busy.
    proc = start_and_wait(cmd, command_env(tmp_path), lambda _: len(list(out.glob("corpus.work/*/processed/*.json"))) >= 2)
    assert len(session_processes(proc.pid)) >= 3  # the command and its workers
    assert kill_and_count_survivors(proc) == []


def _server_up(sid: int) -> bool:
    return any("uvicorn" in " ".join(p.cmdline()) for p in session_processes(sid))


def test_prefects_temporary_server_dies_with_a_sigkilled_run(tmp_path):
    out = tmp_path / "run"
    cmd = [DOMAINBERT, "run", "science", "corpus.shard_documents=500", "--out", str(out)]

    def ready(proc: subprocess.Popen) -> bool:  # the server is up and the corpus stage's workers are at work
        return any(out.glob("corpus.work/*/processed/*.json")) and _server_up(proc.pid)

    proc = start_and_wait(cmd, command_env(tmp_path), ready)
    assert kill_and_count_survivors(proc) == []
