"""One run per run folder: a second one fails at once naming the holder; stale locks are taken over."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from domainbert.cli import app
from domainbert.core.errors import DomainbertError
from domainbert.core.runlock import LOCK, RunLocked, read_lock, run_lock

HOLD = """
import sys, time
from domainbert.core.runlock import run_lock
with run_lock(sys.argv[1], "holder command"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """A live process holding the lock of tmp_path/run."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield run, proc
    proc.kill()
    proc.wait()


def test_second_run_fails_at_once_naming_the_holder(holder):
    run, proc = holder
    t0 = time.monotonic()
    with pytest.raises(RunLocked) as info:
        with run_lock(run, "second"):
            pass
    assert time.monotonic() - t0 < 2
    message = str(info.value)
    assert f"pid {proc.pid}" in message and socket.gethostname() in message and "holder command" in message
    assert "\n" not in message and str(run / LOCK) in message
    assert read_lock(run)["pid"] == proc.pid  # untouched


def test_cli_into_a_locked_folder_is_one_line_exit_2(holder):
    run, proc = holder
    result = CliRunner().invoke(app, ["corpus", "science", "--out", str(run)])
    assert result.exit_code != 0
    assert isinstance(result.exception, RunLocked)
    assert f"pid {proc.pid}" in str(result.exception)
    assert not (run / "corpus").exists()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path, caplog):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "token": "old",
                                        "command": "crashed run", "started": "earlier"}))
    with caplog.at_level(logging.WARNING), run_lock(run, "new run"):
        assert read_lock(run)["pid"] == os.getpid() and read_lock(run)["command"] == "new run"
    assert "stale lock" in caplog.text and "crashed run" in caplog.text
    assert not (run / LOCK).exists()


def test_a_reused_pid_is_not_mistaken_for_the_holder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # This process's pid, but a different start time: the recorded holder is gone.
    (run / LOCK).write_text(json.dumps({"pid": os.getpid(), "pid_start": "1", "host": socket.gethostname(),
                                        "token": "old", "command": "old run", "started": "earlier"}))
    with run_lock(run, "new run"):
        assert read_lock(run)["command"] == "new run"


def test_another_hosts_lock_is_reported_as_held(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK).write_text(json.dumps({"pid": 1, "host": "elsewhere", "token": "t", "command": "c",
                                        "started": "s"}))
    with pytest.raises(RunLocked, match="on elsewhere .*remove the file if that run is dead"):
        with run_lock(run, "x"):
            pass


def test_reentrant_in_process_and_joinable_with_the_token(tmp_path):
    run = tmp_path / "run"
    with run_lock(run, "outer") as token:
        with run_lock(run, "inner") as inner:
            assert inner == token
        assert (run / LOCK).exists()  # only the outermost holder releases
        # Another process given the token joins instead of failing.
        code = ("import sys; from domainbert.core.runlock import run_lock\n"
                "with run_lock(sys.argv[1], 'child', token=sys.argv[2]): print('joined')")
        out = subprocess.run([sys.executable, "-c", code, str(run), token], capture_output=True, text=True)
        assert out.stdout.strip() == "joined", out.stderr
        assert read_lock(run)["token"] == token  # the child did not remove the parent's lock
    assert not (run / LOCK).exists()


def test_lock_released_when_the_body_raises(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(ValueError):
        with run_lock(run, "x"):
            raise ValueError("boom")
    assert not (run / LOCK).exists()


def test_out_that_is_a_file_is_a_user_error(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(DomainbertError, match="cannot write to the run folder"):
        with run_lock(target / "sub", "x"):
            pass


RACER = """
import sys, time
from pathlib import Path
from domainbert.core import runlock
alive = runlock._alive
runlock._alive = lambda holder: time.sleep(0.2) or alive(holder)  # every racer sees the stale lock first
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
try:
    with runlock.run_lock(sys.argv[1], "racer"):
        start = time.monotonic()
        time.sleep(0.6)
        print("held", start, time.monotonic(), flush=True)
except runlock.RunLocked:
    print("locked", flush=True)
"""


@pytest.mark.slow
def test_racers_taking_over_one_stale_lock_never_hold_it_together(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for round_ in range(3):
        run, go = tmp_path / f"run-{round_}", tmp_path / f"go-{round_}"
        run.mkdir()
        (run / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "token": "old",
                                            "command": "crashed run", "started": "earlier"}))
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(run), str(go)], stdout=subprocess.PIPE,
                                   text=True) for _ in range(5)]
        time.sleep(3)  # let them import and wait for the start
        go.touch()
        lines = [r.communicate(timeout=60)[0].split() for r in racers]
        held = sorted((float(line[1]), float(line[2])) for line in lines if line and line[0] == "held")
        assert held and all(line and line[0] in ("held", "locked") for line in lines), lines
        assert all(end <= nxt for (_, end), (nxt, _) in zip(held, held[1:], strict=False)), held  # never together
        assert not (run / LOCK).exists()
