"""The domain report from hand-written run artifacts: its numbers are the fixtures', its verdicts follow the
paired bootstrap of ``domainbert.report.stats``, and a stage that has not run reads "Not run"."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from domainbert.config.domain import DomainConfig, load_domain
from domainbert.core.artifacts import is_complete, read_record
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.report.compare import checked_run, render_report, report_markdown, results_table
from support.report import BASE_MISSES, NER_TASK, write_json, write_ner_result


@pytest.fixture
def cfg() -> DomainConfig:
    return load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, extended, scratch]"])


def _scores(root: Path, model: str) -> list[float]:
    paths = sorted((root / "finetune" / model / NER_TASK).glob("seed-*/result.json"))
    return [json.loads(p.read_text())["test"]["f1"] for p in paths]


def _row(rows: list[dict], model: str) -> dict:
    return next(r for r in rows if r["model"] == model)


def test_report_numbers_come_from_the_artifacts(cfg: DomainConfig, science_run: Path) -> None:
    layout = RunLayout(science_run)
    path = render_report(cfg, layout)
    assert path == layout.report / "report.html"
    assert is_complete(layout.report)
    names = {p.name for p in layout.report.iterdir()}
    assert {"report.html", "report.md", "results.json", "finetune_scores.png", "pretrain_loss.png",
            "pretrain_perplexity.png", "vocab_overlap_curve.png", "corpus_length_histogram.png"} <= names

    base, continued = _scores(science_run, "base"), _scores(science_run, "continued")
    rows = results_table(cfg, layout)  # read back from the rendered report's results.json

    assert [r["model"] for r in rows] == ["base", "continued", "scratch"]
    assert _row(rows, "base")["mean"] == pytest.approx(statistics.mean(base))
    assert _row(rows, "base")["std"] == pytest.approx(statistics.stdev(base))
    assert _row(rows, "base")["verdict"] is None  # the reference itself
    cont = _row(rows, "continued")
    assert cont["reference"] == "base" and cont["verdict"] == "better" and cont["ci_low"] > 0
    # Same seeds and test sets for both models: the paired difference is the difference of the means.
    assert cont["diff"] == pytest.approx(statistics.mean(continued) - statistics.mean(base), abs=1e-9)
    scratch = _row(rows, "scratch")  # identical predictions to base: no difference at all
    assert scratch["diff"] == pytest.approx(0.0) and scratch["verdict"] == "no significant difference"

    md = (layout.report / "report.md").read_text()
    html = path.read_text()
    # the family-wise interval, the one the verdict uses, excludes 0 as the verdict says, and the pairs are named
    saved = json.loads((layout.report / "results.json").read_text())["comparisons"]
    written = next(c for c in saved if c["model"] == "continued" and c["reference"] == "base")
    assert written["fw_low"] > 0 and written["paired"] and f"paired over {written['units']} seeds, r " in md
    assert all("_draws" not in c for c in saved)  # the draws stay in memory
    # the answer a terminal prints: the headline's table, verdict and power, no caveats, no markup
    answer = (layout.report / "answer.txt").read_text()
    assert answer.startswith("domainbert report: science\n") and "Verdict:" in answer and "Power:" in answer
    assert "Caveats:" not in answer and "**" not in answer and "|" not in answer
    assert f"{100 * statistics.mean(base):.1f}" in answer and len(answer.splitlines()) < 40
    shutil.rmtree(layout.report)
    assert results_table(cfg, layout) == rows  # computed afresh: the same numbers
    mean_base = f"{100 * statistics.mean(base):.1f}"
    per_seed = ", ".join(f"{100 * v:.1f}" for v in base)
    row = f"| base | 3 | {mean_base} | {100 * statistics.stdev(base):.1f} | {per_seed} | 0/3 | 0 | - | - | (reference) | 1.5 |"
    assert row in md
    assert f"<td class=\"num\">{mean_base}</td>" in html
    sentence = (f"continued beat base on {NER_TASK} by {100 * cont['diff']:+.1f} F1 "
                f"(95% CI {100 * cont['ci_low']:+.1f} to {100 * cont['ci_high']:+.1f}; at Holm's level")
    assert sentence in md and sentence.split("; at Holm")[0] in html
    assert scratch["verdict"] == "no significant difference" and "scratch did not differ" in md
    # Corpus, vocab and pretraining figures are the fixtures' (decontamination counts included).
    assert "29 documents removed and 41 sentences cut" in md
    assert "| law-license-category/test | 120 | 20 | 30 |" in md
    assert "| train | 1,234 | 56,789 | 345,678 | 71,234 |" in md
    assert "Recommendation: extend (by 412 tokens) - add the 412 most costly words." in md
    assert "| bert-base-uncased | 61.3% | 61.3% | 68.8% |" in md
    assert ("| SciBERT SciVocab | bert-base-uncased | 42.0% | 31,090 | 3,170,000,000 | 61.3% | 30,522 | 56,789 | 68.8% | "
            in md)
    assert "SciBERT SciVocab reported that 42.0% of its vocabulary" in md
    assert "| continued | 20 | 40,960 | 1.00e-04 | 4.321 | 30.0 -> 12.5 | 40.2 -> 55.5 |" in md
    assert "Not run: arm(s) extended" in md
    assert "| continued | 50.4 | 812.5 | 0.970 | 1.200e+07 | 4.915e+11 | - | torch | 1 | fp32 | 1,234,567 |" in md
    # The HTML is one self-contained file: every image is embedded.
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 6  # the answer figure opens the page
    assert not re.search(r'(src|href)="(?!data:|#)', html)


def test_verdict_flips_when_the_interval_excludes_zero(cfg: DomainConfig, science_run: Path) -> None:
    layout = RunLayout(science_run)
    assert _row(results_table(cfg, layout), "scratch")["verdict"] == "no significant difference"
    for seed in BASE_MISSES:  # scratch now misses most entities on every seed
        write_ner_result(science_run, "scratch", NER_TASK, seed, 36)
    scratch = _row(results_table(cfg, layout), "scratch")
    assert scratch["verdict"] == "worse" and scratch["ci_high"] < 0
    md = report_markdown(cfg, layout)
    assert f"scratch was worse than base on {NER_TASK} by {100 * scratch['diff']:+.1f} F1" in md
    assert f"continued beat scratch on {NER_TASK}" in md


def test_a_comparison_that_cannot_be_made_is_reported_not_fatal(cfg: DomainConfig, science_run: Path) -> None:
    shutil.rmtree(science_run / "finetune" / "scratch")
    for seed in (1, 2):  # scratch was tested on another test set: nothing to compare
        write_ner_result(science_run, "scratch", NER_TASK, seed, 20)
        path = science_run / "finetune" / "scratch" / NER_TASK / f"seed-{seed}" / "result.json"
        result = json.loads(path.read_text())
        result["gold"], result["pred"] = result["gold"][1:], result["pred"][1:]
        path.write_text(json.dumps(result))
    render_report(cfg, RunLayout(science_run))
    md = (science_run / "report" / "report.md").read_text()
    assert _row(results_table(cfg, RunLayout(science_run)), "scratch")["verdict"] == "not compared"
    assert "tested on different gold answers" in md
    assert f"| scratch vs base | {NER_TASK} | 0 | - | - | - | - | - | - | not compared |" in md
    assert f"continued beat base on {NER_TASK}" in md


def test_missing_stages_read_not_run(cfg: DomainConfig, tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "empty-run")
    path = render_report(cfg, layout)
    md = (layout.report / "report.md").read_text()
    for stage in ("corpus/manifest.json was not found", "vocab/report.json was not found",
                  "no pretrain/<arm>/summary.json", "no finetune/<model>/<task>/seed-*/result.json"):
        assert f"Not run: {stage}" in md
    assert "No fine-tuning results yet, so no verdict" in md
    assert not list(layout.report.glob("*.png"))  # no empty or made-up figures
    assert "<img" not in path.read_text()
    assert results_table(cfg, layout) == []


def test_a_configured_task_without_results_reads_not_run(cfg: DomainConfig, science_run: Path) -> None:
    extra = cfg.finetune.tasks[0].model_copy(update={"name": "extra-task"})
    cfg = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"tasks": [extra]})})
    render_report(cfg, RunLayout(science_run))
    md = (science_run / "report" / "report.md").read_text()
    # Results of a task outside the config are listed, never mixed into the tables.
    check = checked_run(cfg, RunLayout(science_run)).result_check
    assert check is not None and (check.expected, check.missing[0]) == (13, "floor/extra-task/seed-0")
    assert f"base/{NER_TASK}/seed-1" in check.other and "Results: 0 of the 13" in md
    assert f"continued beat base on {NER_TASK}" not in md


def test_rerender_is_skipped_until_an_artifact_changes(cfg: DomainConfig, science_run: Path) -> None:
    layout = RunLayout(science_run)
    render_report(cfg, layout)
    first = read_record(layout.report)["finished_at"], (layout.report / "report.md").stat().st_mtime_ns
    render_report(cfg, layout)
    assert ((read_record(layout.report)["finished_at"], (layout.report / "report.md").stat().st_mtime_ns)
            == first)
    write_ner_result(science_run, "base", NER_TASK, 1, 10)  # base seed 1 re-run with a better score
    render_report(cfg, layout)
    mean = statistics.mean(_scores(science_run, "base"))
    assert f"| base | 3 | {100 * mean:.1f} |" in (layout.report / "report.md").read_text()


def test_unreadable_artifact_is_a_data_error_naming_the_file(cfg: DomainConfig, science_run: Path) -> None:
    (science_run / "pretrain" / "continued" / "metrics.jsonl").write_text('{"kind": "train"}\n{"step": \n')
    with pytest.raises(DataError, match=r"metrics\.jsonl:2"):
        render_report(cfg, RunLayout(science_run))
    write_json(science_run / "finetune" / "base" / NER_TASK / "seed-9" / "result.json", {"model": "base"})
    (science_run / "pretrain" / "continued" / "metrics.jsonl").write_text("")
    with pytest.raises(DataError, match=r"seed-9/result\.json.*not a valid FinetuneResult: model_ref: Field required"):
        render_report(cfg, RunLayout(science_run))
    assert not (science_run / "report").exists()  # nothing half-written
