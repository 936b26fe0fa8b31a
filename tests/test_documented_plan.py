"""``domainbert plan`` as the docs write it, on a fresh folder: every arm gets steps, tokens and a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_plan_science_on_an_empty_folder_estimates_every_arm(tmp_path):
    """The TAPT arm's task text does not exist before the run: its size comes from the task files, so the
    estimate (a TypeError once) covers it too."""
    out = tmp_path / "empty"
    out.mkdir()
    command = Path(sys.executable).parent / "domainbert"  # the console script, as the docs call it
    proc = subprocess.run([str(command), "plan", "science", "--out", str(out)], capture_output=True, text=True,
                          env={**os.environ, "DOMAINBERT_LOG_LEVEL": "WARNING"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    arms = [line for line in proc.stdout.splitlines() if line.startswith("pretrain ")]
    assert any(line.startswith("pretrain tapt") for line in arms), proc.stdout
    for line in arms:
        assert " tokens" in line and " min" in line, line  # sized and timed, the task-text arm included
    [tapt] = [line for line in arms if line.startswith("pretrain tapt")]
    assert "(task text estimated from the task files)" in tapt
    assert "estimated model time" in proc.stdout
