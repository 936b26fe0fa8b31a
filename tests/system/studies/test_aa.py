"""The A/A pages' null pairs on real runs' scores (``studies.aa``). The false-positive rate over 200 such pages is
a study (``aa_pages``, studies/paired-comparisons.md), not a test: the suite checks the comparison's calibration on
every null split of the same runs in ``test_report_calibration.py``.

The runs are ``studies/scores/science-demo-6seeds.json.gz``: make demo's design with six seeds (base, original,
continued, control on science-terms-ner, 1,952 test sentences), each run's per-sentence counts as committed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from studies.aa import null_pair
from studies.score_files import read_scores

SCORES = Path(__file__).resolve().parents[3] / "studies" / "scores" / "science-demo-6seeds.json.gz"


def demo_runs() -> list[dict]:
    _, runs = read_scores(SCORES)
    return [r for r in runs if r["model"] != "floor"]


def test_a_null_pair_splits_one_model_s_runs_and_shifts_the_second_half_s_seeds():
    runs = [r for r in demo_runs() if r["model"] == "base"]
    a, b = null_pair(runs, np.random.default_rng(0))
    assert len(a) == len(b) == 3 and {r["model"] for r in a} == {"A"} and {r["model"] for r in b} == {"B"}
    assert [r["seed"] for r in a] == [r["seed"] for r in b]  # paired as arms are, though the seeds share nothing
    original = {r["seed"] for r in runs}
    used = {id(r) for r in a}
    assert len(used) == 3 and original >= {r["seed"] for r in a}
    assert null_pair(runs[:3], np.random.default_rng(0)) is None  # three runs cannot make two arms of two


REPLICATES = SCORES.with_name("science-demo-replicates.json.gz")


def test_a_null_pair_of_an_arm_with_replicates_splits_its_replicates():
    _, runs = read_scores(REPLICATES)
    from domainbert.report.results import group_results

    continued = group_results(runs)["science-terms-ner"]["continued"]
    assert len({r["replicate"] for r in continued}) == 4 and len(continued) == 24
    a, b = null_pair(continued, np.random.default_rng(1))
    assert sorted({r["replicate"] for r in a}) == sorted({r["replicate"] for r in b}) == [1, 2]
    assert len(a) == len(b) == 12  # two replicates a side, each with its six seeds, renumbered 1 and 2
