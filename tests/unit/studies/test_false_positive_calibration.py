"""Study 19's table against its committed counts: every row of the answer's table is a design of the counts
file, with the same pages and false pages for the method and both variants, and no design is left out."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STUDY = ROOT / "studies" / "19-false-positive-calibration.md"
COUNTS = ROOT / "studies" / "scores" / "study-19-false-positive-calibration-partial.json"


def _table_rows() -> list[tuple[str, int, int, float, list[tuple[int, int]]]]:
    rows = []
    task = ""
    for line in STUDY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.fullmatch(r"\d+ x \d", cells[1]):
            continue
        task = cells[0].split(" (")[0] or task
        seeds, reps = (int(x) for x in cells[1].split(" x "))
        counts = [tuple(int(x) for x in re.match(r"(\d+)/(\d+)", c).groups()) for c in cells[3:]]  # type: ignore[union-attr]
        rows.append((task, seeds, reps, float(cells[2]), [(n, k) for k, n in counts]))
    return rows


def test_the_study_table_equals_its_counts_file() -> None:
    designs = json.loads(COUNTS.read_text(encoding="utf-8"))["designs"]
    by_key = {(d["task"], d["seeds"], d["replicates"], round(d["r"], 2)): d for d in designs}
    rows = _table_rows()
    assert len(rows) == len(designs) == len(by_key)
    for task, seeds, reps, r, counts in rows:
        design = by_key[(task, seeds, reps, r)]
        assert [tuple(design[m]) for m in ("method", "normal", "examples")] == counts
        assert design["page"] == 72


def test_the_method_stays_within_the_preregistered_bound_and_both_variants_exceed_it_somewhere() -> None:
    # the preregistered rule: a rate of at most 5% plus twice its binomial Monte Carlo error
    designs = json.loads(COUNTS.read_text(encoding="utf-8"))["designs"]

    def within(pages: int, false: int) -> bool:
        rate = false / pages
        return rate <= 0.05 + 2 * (0.05 * 0.95 / pages) ** 0.5

    assert all(within(*d["method"]) for d in designs)
    assert not all(within(*d["normal"]) for d in designs)
    assert not all(within(*d["examples"]) for d in designs)
