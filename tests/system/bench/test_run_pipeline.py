"""bench/common.py ``run_pipeline``: a stop reaches the wrapped domainbert command, which ends cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"

# A stand-in for a stage command's stop: on SIGINT or SIGTERM it takes a second to save its state, then
# exits 130, as domainbert does after its one INFO line.
CHILD = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def stop(signum, frame):
    time.sleep(1.0)
    (out / "saved").write_text(signal.Signals(signum).name)
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
(out / "ready").write_text("")
time.sleep(60)
"""

# A bench script as a terminal starts it: Python's own SIGINT handler (a test runner's worker may have left
# SIGINT ignored, which its children inherit).
PARENT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {bench!r})
from common import run_pipeline
sys.exit(run_pipeline([sys.executable, "-c", {child!r}, {out!r}]))
"""


def start(tmp_path: Path) -> subprocess.Popen:
    code = PARENT.format(bench=str(BENCH), child=CHILD, out=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the child never started"
        time.sleep(0.05)
    return proc


def test_ctrl_c_to_the_group_lets_the_child_finish_its_stop(tmp_path: Path) -> None:
    proc = start(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does
    assert proc.wait(timeout=30) == 130
    assert (tmp_path / "saved").read_text() == "SIGINT"  # subprocess.run would have killed it before this


def test_sigterm_to_the_parent_alone_is_passed_on(tmp_path: Path) -> None:
    proc = start(tmp_path)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert (tmp_path / "saved").read_text() == "SIGTERM"


def test_past_its_timeout_the_child_is_stopped_cleanly_and_none_returned(tmp_path: Path) -> None:
    code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); from common import run_pipeline; "
            f"rc = run_pipeline([sys.executable, '-c', {CHILD!r}, {str(tmp_path)!r}], timeout=3); "
            "sys.exit(0 if rc is None else 1)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
    assert (tmp_path / "saved").read_text() == "SIGINT"
