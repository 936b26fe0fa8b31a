"""Running a benchmark's or a study script's quick mode as a user would, and reading the record it writes. Not a
test module: ``tests/system/bench/test_bench_quick.py`` and ``tests/system/studies/test_study_scripts_quick.py``
call it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_quick(script: Path, args: list[str], record: str, tmp_path: Path) -> dict[str, Any]:
    """Run ``script`` with ``args`` in ``tmp_path`` and return the JSON record ``record`` it wrote there."""
    # the machine cache under tmp_path too: a quick warm-up must not be what a user's next run reuses
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / record).read_text())
