"""``studies/rescore.py --rename FILE:OLD=NEW``: a model renamed in one score file takes its pretraining
replicates with it (``OLD@r2`` becomes ``NEW@r2``), so runs of one arm from several folders stay apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from studies.rescore import _renamed


def test_a_renamed_arm_takes_its_replicates_and_leaves_other_models_and_files_alone() -> None:
    runs = [{"model": m} for m in ("continued", "continued@r2", "continued@r4", "continued-x", "base")]
    renamed = _renamed(runs, Path("b.json.gz"), ["b.json.gz:continued=continued-wsd", "a.json.gz:base=original"])
    assert [r["model"] for r in renamed] == [
        "continued-wsd", "continued-wsd@r2", "continued-wsd@r4", "continued-x", "base"
    ]


def test_a_rename_without_its_parts_stops_with_one_line() -> None:
    with pytest.raises(SystemExit, match="expected FILE:OLD=NEW"):
        _renamed([{"model": "base"}], Path("a.json.gz"), ["a.json.gz:base"])
