"""Study 19's table against its committed counts: every row of the answer's table is a design of the counts
file at page size 72, with the same pages and false pages for the method and both variants and the method's
range over the design's page sizes, and no design is left out. The stopped run's counts (parsed from its logs)
equal the whole run's."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STUDY = ROOT / "studies" / "19-false-positive-calibration.md"
COUNTS = ROOT / "studies" / "scores" / "study-19-false-positive-calibration.json"
PARTIAL = ROOT / "studies" / "scores" / "study-19-false-positive-calibration-partial.json"
KINDS = ("method", "normal", "examples")


def _table_rows() -> list[tuple[str, int, int, float, list[tuple[int, int]], str]]:
    rows = []
    for line in STUDY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not re.fullmatch(r"\d+ x \d", cells[1]):
            continue
        seeds, reps = (int(x) for x in cells[1].split(" x "))
        read = [cells[3], cells[5], cells[6]]
        counts = [tuple(int(x) for x in re.match(r"(\d+)/(\d+)", c).groups()) for c in read]  # type: ignore[union-attr]
        rows.append((cells[0].split(" (")[0], seeds, reps, float(cells[2]), [(n, k) for k, n in counts], cells[4]))
    return rows


def test_the_study_table_equals_its_counts_file() -> None:
    designs = json.loads(COUNTS.read_text(encoding="utf-8"))["designs"]
    at_72 = [d for d in designs if d["page"] == 72]
    by_key = {(d["task"], d["seeds"], d["replicates"], round(d["r"], 2)): d for d in at_72}
    rows = _table_rows()
    assert len(rows) == len(at_72) == len(by_key) == 24
    for task, seeds, reps, r, counts, method_range in rows:
        design = by_key[(task, seeds, reps, r)]
        assert [tuple(design[m]) for m in KINDS] == counts
        sizes = [
            d
            for d in designs
            if d["task"] == task
            and d["seeds"] == seeds
            and d["replicates"] == reps
            and d["correlation"] == design["correlation"]
        ]
        rates = [100 * d["method"][1] / d["method"][0] for d in sizes]
        assert len(sizes) == 8 and method_range == f"{min(rates):.1f}-{max(rates):.1f}%"


def test_the_stopped_runs_counts_equal_the_whole_runs() -> None:
    key = ("task", "seeds", "replicates", "correlation", "page")
    whole = {tuple(d[k] for k in key): d for d in json.loads(COUNTS.read_text(encoding="utf-8"))["designs"]}
    for d in json.loads(PARTIAL.read_text(encoding="utf-8"))["designs"]:
        assert [whole[tuple(d[k] for k in key)][m] for m in KINDS] == [d[m] for m in KINDS]


def test_the_method_stays_within_the_preregistered_bound_and_both_variants_exceed_it_somewhere() -> None:
    # the preregistered rule: a rate of at most 5% plus twice its binomial Monte Carlo error
    designs = json.loads(COUNTS.read_text(encoding="utf-8"))["designs"]

    def within(pages: int, false: int) -> bool:
        rate = false / pages
        return rate <= 0.05 + 2 * (0.05 * 0.95 / pages) ** 0.5

    assert all(within(*d["method"]) for d in designs)
    assert not all(within(*d["normal"]) for d in designs)
    assert not all(within(*d["examples"]) for d in designs)
