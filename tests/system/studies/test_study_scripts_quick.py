"""The quick mode of each research script that has one runs and writes its JSON record, so a study script
broken by a change fails CI (slow lane). The quick figures mean nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "studies" / "scripts"

pytestmark = [pytest.mark.slow]

QUICK = {
    # script, arguments, the record it writes, keys the record must hold
    "pooling": (["science", "--quick"], "pooling-science.json", ["comparisons", "seconds"]),
    "warmup_cost": (["science", "--quick"], "warmup-cost-science.json", ["recipes"]),
    "floor_window": (["science", "--task", "science-subject"], "floor-window-science-science-subject.json",
                     ["whole_text", "window", "per_class_lost"]),
    "recipe_sweep": (["science", "--task", "science-subject", "--grid", "lr=1e-4,3e-4", "--quick"],
                     "recipe-science-science-subject-quick.json", ["chosen", "rows"]),
}


@pytest.mark.parametrize("script", sorted(QUICK))
def test_the_quick_mode_of_each_study_script_runs(script, tmp_path):
    args, record, keys = QUICK[script]
    # the machine cache under tmp_path too: a quick warm-up must not be what a user's next run reuses
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(SCRIPTS / f"{script}.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = json.loads((tmp_path / record).read_text())
    for key in keys:
        assert key in written, (key, sorted(written))
