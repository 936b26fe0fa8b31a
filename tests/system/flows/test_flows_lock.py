"""Flows take the run folder's lock: a stage flow into a folder another run holds fails at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from domainbert.core.runlock import LOCK, RunLocked, read_lock

HOLD = """
import sys, time
from domainbert.core.runlock import run_lock
with run_lock(sys.argv[1], "holder"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_stage_flow_into_a_locked_folder_fails_at_once(tmp_path, tiny_domain):
    from domainbert.flows.options import RunSpec
    from domainbert.flows.stages import report_flow

    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=f"pid {proc.pid}"):
            report_flow(RunSpec(domain=str(tiny_domain), out=str(run)))
        assert read_lock(run)["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()
    assert not (run / "report").exists() and (run / LOCK).exists()
