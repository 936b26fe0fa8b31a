"""Whole pages against their expected text: a significant page, a page with a floor and collapsed runs, and the page
of make demo's committed score file. The expected pages are written by the code, never by hand:

    DOMAINBERT_WRITE_GOLDEN=1 python -m pytest tests/unit/report/test_report_golden.py

rewrites ``tests/unit/report/golden/*.md`` from the current code; review the diff before committing it. The time the
page was rendered (its last line) is left out of the comparison.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from domainbert.config.domain import load_domain
from domainbert.core.document import Document, to_markdown
from domainbert.core.paths import RunLayout
from domainbert.report import finetune_sections
from domainbert.report.compare import render_report
from domainbert.report.headline import headline_section
from domainbert.report.inputs import RunArtifacts
from domainbert.report.results import build_tables, default_compare_fn
from studies.score_files import read_scores
from support.report import NER_TASK, write_json, write_ner_result

GOLDEN = Path(__file__).parent / "golden"
DEMO_SCORES = Path(__file__).parents[3] / "studies" / "scores" / "science-demo-6seeds.json.gz"


def check(name: str, page: str) -> None:
    page = re.sub(r"Rendered \d{4}-\d\d-\d\d \d\d:\d\d UTC by domainbert \S+", "Rendered <time> by domainbert", page)
    path = GOLDEN / f"{name}.md"
    if os.environ.get("DOMAINBERT_WRITE_GOLDEN"):
        path.write_text(page, encoding="utf-8")
    assert page == path.read_text(encoding="utf-8"), f"{name}: the page changed (see the module docstring)"


def render(run: Path, arms: str) -> str:
    cfg = load_domain("science", ["compare.bootstrap_samples=200", f"pretrain.arms=[{arms}]",
                                  "finetune.only_tasks=[science-terms-ner]"])
    render_report(cfg, RunLayout(run))
    return (run / "report" / "report.md").read_text(encoding="utf-8")


def test_a_page_where_an_arm_beats_the_base(science_run: Path) -> None:
    check("significant", render(science_run, "continued, scratch"))


def test_a_page_with_a_floor_collapsed_runs_and_a_warm_up(science_run: Path) -> None:
    write_ner_result(science_run, "floor", NER_TASK, 0, 10)
    for seed in (1, 2, 3):
        path = science_run / "finetune" / "scratch" / NER_TASK / f"seed-{seed}" / "result.json"
        result = json.loads(path.read_text())
        result["collapsed"] = True
        path.write_text(json.dumps(result))
    write_json(science_run / "pretrain" / "base-warmup" / "summary.json", {
        "train": "head", "converged": True, "from_machine_cache": False,
        "steps": 40, "tokens": 81920, "wall_seconds": 21.0, "trainable_parameters": 178000,
        "domain_perplexity_random_head": 45000.0, "domain_perplexity": 90.5,
        "general_perplexity_random_head": 47000.0, "general_perplexity": 30.25})
    check("floor-collapsed", render(science_run, "continued, scratch"))


@pytest.mark.skipif(not DEMO_SCORES.is_file(), reason="studies/scores/ is not in this tree")
def test_the_page_of_the_demo_s_committed_scores(tmp_path: Path) -> None:
    _, runs = read_scores(DEMO_SCORES)
    arms = [a for a in ("continued", "extended", "scratch", "tapt", "control") if any(r["model"] == a for r in runs)]
    scores, comparisons = build_tables(runs, [], arms, [], default_compare_fn(200, 0.95, 0), 0.95)
    arts = RunArtifacts(root=tmp_path, finetune=runs)
    doc = Document("science-demo-6seeds", [
        headline_section(scores, comparisons, arts, arms, [], [], None, 6),
        finetune_sections.summary_section(scores, comparisons),
        finetune_sections.finetune_section(scores, comparisons, tmp_path, 200, []),
    ])
    check("demo-scores", to_markdown(doc))
