"""The cross-domain page puts several runs side by side, from their artifacts alone."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from domainbert.config.finetune import CompareConfig
from domainbert.core.paths import RunLayout
from domainbert.report.compare import render_report
from domainbert.report.cross_domain import render_cross_domain
from support.report import write_cls_result, write_corpus, write_pretrain

LAW_TASK = "law-license-category"


def _law_run(root: Path) -> list[float]:
    write_corpus(root)
    write_pretrain(root, "continued", 25.0, 9.5)
    wrong = {"base": [30, 28, 29], "continued": [29, 30, 28]}  # no real difference
    scores = {model: [write_cls_result(root, model, LAW_TASK, seed, w) for seed, w in zip((1, 2, 3), per_seed,
                                                                                         strict=True)]
              for model, per_seed in wrong.items()}
    return scores["continued"]


def test_cross_domain_page_over_three_runs(science_run: Path, tmp_path: Path) -> None:
    law = tmp_path / "runs" / "law"
    law_continued = _law_run(law)
    tweets = tmp_path / "runs" / "tweets"
    write_corpus(tweets)  # only the corpus stage ran
    out = tmp_path / "runs" / "cross-domain"
    compare = CompareConfig(bootstrap_samples=200)

    path = render_cross_domain({"science": science_run, "law": law, "tweets": tweets}, out, compare=compare)
    assert path == out / "report.html"
    md = (out / "report.md").read_text()
    html = path.read_text()

    assert f"| law | {LAW_TASK} | continued | 3 | {100 * statistics.mean(law_continued):.1f} | " in md
    assert f"continued did not differ significantly from base on {LAW_TASK}" in md
    assert "continued beat base on science-terms-ner" in md
    assert "tweets: no fine-tuning results (not run)." in md
    assert "| tweets | not run | - | - | - |" in md  # no pretraining in that run
    # Seconds from different machines share the column: it says so, with what each run recorded of its machine.
    assert "train seconds (each run's own machine)" in md and "measured on the machine each run was made on" in md
    assert "| law | continued | " in md and "| 50.4 (fp32, 1 process(es)" in md
    assert "| science | 1,234 | 71,234 | extend (by 412 tokens) | 61.3% (bert-base-uncased) |" in md
    assert "| law | 1,234 | 71,234 | not run | - |" in md
    # Links to the per-domain pages, relative to the cross-domain folder.
    assert "science: ../science/report/report.html (not rendered yet)" in md
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 1
    assert (out / "cross_domain_scores.png").is_file()


def test_cross_domain_links_rendered_reports_and_rerenders_on_change(science_run: Path, tmp_path: Path) -> None:
    from domainbert.config.domain import load_domain

    render_report(load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, extended, scratch]"]),
                  RunLayout(science_run))
    out = tmp_path / "cross"
    render_cross_domain({"science": science_run}, out, compare=CompareConfig(bootstrap_samples=200))
    md = (out / "report.md").read_text()
    assert f"science: {Path('..') / 'runs' / 'science' / 'report' / 'report.html'}" in md
    assert "(not rendered yet)" not in md
    score = write_cls_result(science_run, "base", LAW_TASK, 1, 5)  # a new result: the page is rendered again
    render_cross_domain({"science": science_run}, out, compare=CompareConfig(bootstrap_samples=200))
    assert f"| science | {LAW_TASK} | base | 1 | {100 * score:.1f} | - |" in (out / "report.md").read_text()


def test_compare_command_renders_the_page_from_run_folders(science_run: Path, tmp_path: Path) -> None:
    """``domainbert compare`` takes DOMAIN=DIR pairs or plain folders (named by the folder) and needs two."""
    from typer.testing import CliRunner

    from domainbert.cli import app

    law = tmp_path / "runs" / "law"
    _law_run(law)
    out = tmp_path / "cross"
    result = CliRunner().invoke(app, ["compare", f"science={science_run}", str(law), "--out", str(out)])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert f"| law | {LAW_TASK} | continued | 3 |" in md and "science" in md
    one = CliRunner().invoke(app, ["compare", str(law), "--out", str(tmp_path / "x")])
    assert one.exit_code != 0 and "at least two runs" in str(one.exception)


def test_cross_domain_page_shows_the_floor(tmp_path: Path) -> None:
    law = tmp_path / "runs" / "law"
    _law_run(law)
    floor = write_cls_result(law, "floor", LAW_TASK, 0, 10)  # 10 wrong: above both models (28-30 wrong)
    out = tmp_path / "cross"
    render_cross_domain({"law": law}, out, compare=CompareConfig(bootstrap_samples=200))
    md = (out / "report.md").read_text()
    assert f"| law | {LAW_TASK} | floor | 1 | {100 * floor:.1f} | - | 0/1 |" in md
    assert f"Below the floor on {LAW_TASK} ({100 * floor:.1f} macro-F1" in md
    assert f"| law | {LAW_TASK} | base vs floor |" in md


def test_each_domain_keeps_its_caveats_and_a_run_given_twice_is_refused(science_run: Path, tmp_path: Path) -> None:
    import pytest

    from domainbert.core.errors import DataError

    law = tmp_path / "runs" / "law"
    _law_run(law)
    out = tmp_path / "runs" / "cross-domain"
    render_cross_domain({"science": science_run, "law": law}, out, compare=CompareConfig(bootstrap_samples=200))
    summary = (out / "report.md").read_text().split("## Summary")[1].split("\n## ")[0]
    for domain in ("science", "law"):
        block = summary.split(f"{domain}:")[1]
        assert "Caveat: Seeds: 3 per model and task" in block
    assert "Caveat: Pretraining budget:" in summary and "too small to conclude" in summary
    with pytest.raises(DataError, match="the same run is given twice, as 'science' and 'copy'"):
        render_cross_domain({"science": science_run, "copy": science_run / "." }, tmp_path / "x")
