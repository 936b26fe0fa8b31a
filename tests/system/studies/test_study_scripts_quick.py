"""The quick mode of each research script that has one runs and writes its JSON record, so a study script
broken by a change fails CI (slow lane). The quick figures mean nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.quick_modes import run_quick

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
    written = run_quick(SCRIPTS / f"{script}.py", args, record, tmp_path)
    for key in keys:
        assert key in written, (key, sorted(written))
