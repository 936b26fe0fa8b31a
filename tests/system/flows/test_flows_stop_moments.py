"""A stop at every moment of ``domainbert run``, Prefect's own start-up and shutdown included: Ctrl-C (SIGINT to
the whole process group, as a terminal sends it) as the temporary server starts, once it answers, as the flow run
begins, after the last stage and while the server stops; a scheduler's SIGTERM (to the command's process alone)
at the three moments of ``SIGTERM_MOMENTS``. Every one ends the command within ``STOP_WITHIN_S`` with 130 or
143 and one INFO line naming the command that continues the run; no ERROR, no traceback, no "Crash detected";
nothing the command started runs on; the lock is released; and the run completes afterwards (a SIGTERM case's
command is a rerun after its Ctrl-C; one case also reruns to the end).

The moments share one finished tiny run (and its Prefect database), copied per moment, so a moment after the
last stage comes after a minute, not after every stage computed again. They are one test, so that run is built
once.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from support.flows import STOP_WITHIN_S, base_env, family, session_processes, stop_group

pytestmark = [pytest.mark.slow]
DOMAINBERT = str(Path(sys.executable).with_name("domainbert"))
SERVER_STARTING = "Starting temporary server on "


def _env(home: Path) -> dict[str, str]:
    # Prefect gives its temporary server 20 s to answer by default: too little on a loaded 2-core machine.
    return {**base_env(home), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"}


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def _server_up(line: str) -> bool:
    """Right after the temporary server first answers (the command is then creating the flow run)."""
    found = re.search(rf"{SERVER_STARTING}(\S+)", line)
    if not found:
        return False
    url = f"{found.group(1)}/api"
    deadline = time.monotonic() + 120
    while not _answers(url):
        assert time.monotonic() < deadline, f"the server at {url} never answered"
        time.sleep(0.02)
    return True


# (case id, when to send the signal: a predicate on each output line that returns once that moment is here)
MOMENTS: list[tuple[str, Callable[[str], bool]]] = [
    ("server-starting", lambda line: SERVER_STARTING in line),
    ("server-up", _server_up),
    ("flow-run-begun", lambda line: "Beginning flow run" in line),
    ("after-last-stage", lambda line: "| prefect.flow_runs - report: " in line),
    ("server-stopping", lambda line: "Stopping temporary server" in line),
]
# A scheduler's SIGTERM reaches the command alone, which must then stop the server itself: the server's start cut
# short, a stop inside the flow engine's own code, and one after the last stage. Ctrl-C goes to the group at every
# moment; SIGTERM at the two others repeats these paths for 2 of the test's 10 commands.
SIGTERM_MOMENTS = ("server-starting", "flow-run-begun", "after-last-stage")


def _launch(cmd: list[str], env: dict[str, str], at: Callable[[str], bool], sig: signal.Signals, group: bool):
    """Start ``cmd`` in a session of its own; when ``at`` holds for an output line, send ``sig`` to its process
    group (``group``) or process. (exit status, seconds from the signal to the exit, the output, the command
    lines of the processes it started that still run after it ended)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if at(line):
                break
        assert proc.poll() is None, "the command ended before the moment:\n" + "".join(lines)[-3000:]
        started = family(proc.pid)
        sent = time.monotonic()
        (os.killpg if group else os.kill)(proc.pid, sig)
        rest = proc.communicate(timeout=120)[0]
        took = time.monotonic() - sent
        return proc.returncode, took, "".join(lines) + rest, _survivors(proc.pid, started)
    finally:
        stop_group(proc)


def _survivors(pid: int, started: list[psutil.Process]) -> list[str]:
    """What ``pid`` started (``started``, and its session's) that still runs a few seconds after it ended."""
    deadline = time.monotonic() + 3
    while True:
        left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        left += session_processes(pid)
        if not left or time.monotonic() > deadline:
            return [" ".join(p.cmdline())[:120] for p in left]
        time.sleep(0.1)


def finished_run(root: Path, tiny_model: Path) -> tuple[Path, Path, Path]:
    """A tiny domain run to the end: (domain YAML, run folder, PREFECT_HOME)."""
    from support.flows import CORPORA, TINY_YAML

    root.mkdir()
    domain = root / "tiny.yaml"
    domain.write_text(TINY_YAML.format(corpora=CORPORA, base_model=tiny_model))
    out, home = root / "run", root / "prefect-home"
    done = subprocess.run(
        [DOMAINBERT, "run", str(domain), "--out", str(out)],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    return domain, out, home


def test_a_stop_at_any_moment_of_run_is_quiet_and_the_run_completes_after_it(tiny_model: Path, tmp_path: Path) -> None:
    """One test for every moment: the finished run they share takes a minute, and a module fixture would be built
    once per test process that took one of the moments. Every moment runs; the failures are reported together."""
    finished = finished_run(tmp_path / "finished", tiny_model)
    failures = []
    for name, moment in MOMENTS:
        try:
            stop_at(moment, finished, tmp_path / name, rerun=name == "flow-run-begun")
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n\n".join(failures)


def stop_at(
    moment: Callable[[str], bool], finished_run: tuple[Path, Path, Path], where: Path, rerun: bool
) -> None:
    """Ctrl-C, then SIGTERM where ``SIGTERM_MOMENTS`` names it, at ``moment`` of a rerun of a copy of
    ``finished_run`` under ``where``; with ``rerun`` the run then completes."""
    domain, finished, finished_home = finished_run
    out, home = where / "run", where / "prefect-home"
    shutil.copytree(finished, out)
    shutil.copytree(finished_home, home)
    env = _env(home)
    cmd = [DOMAINBERT, "run", str(domain), "--out", str(out)]
    stops = [(signal.SIGINT, True)] + ([(signal.SIGTERM, False)] if where.name in SIGTERM_MOMENTS else [])
    for sig, group in stops:
        code, took, log, survivors = _launch(cmd, env, moment, sig, group)
        where_text = f"{sig.name} to the {'group' if group else 'process'}:\n{log[-3000:]}"
        assert code == 128 + sig, where_text
        assert took < STOP_WITHIN_S, (took, where_text)
        for noise in ("ERROR", "Traceback", "Crash detected", "Crashed", "Error logging to API", "ConnectError"):
            assert noise not in log, (noise, where_text)
        stopped = [line for line in log.splitlines() if "to continue, rerun: domainbert run" in line]
        assert len(stopped) == 1 and " INFO " in stopped[0] and f"stopped by {sig.name}" in stopped[0], where_text
        assert survivors == [], where_text
        assert not (out / ".lock").exists(), where_text
    if not rerun:  # a rerun after every moment would double the test's time; one is enough
        return
    # After a stop as the flow run began (the pipeline Cancelled before its first stage), the run completes.
    again = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert again.returncode == 0 and "Traceback" not in again.stdout, again.stdout[-3000:]
    assert f"report: {out / 'report' / 'report.html'}" in again.stdout, again.stdout[-3000:]
