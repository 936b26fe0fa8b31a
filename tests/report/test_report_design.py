"""The design's power before the compute is spent (what `domainbert plan` prints per task), and that it is the
report's own figure once results exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import NER_TASK, write_ner_result

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.report.design import design_power, solve_design
from domainbert.report.power import PRIORS, design_se, detectable_difference


def config(*overrides: str, max_test: int | None = None):
    cfg = load_domain("science", ["finetune.only_tasks=[science-terms-ner]", "pretrain.arms=[continued]", *overrides])
    cfg.finetune.tasks[0] = cfg.finetune.tasks[0].model_copy(update={"max_test_examples": max_test})
    return cfg


def power(tmp_path: Path, *overrides: str, max_test: int | None = None):
    (one,) = design_power(config(*overrides, max_test=max_test), RunLayout(tmp_path / "run"))
    return one


def test_the_detectable_difference_shrinks_when_the_test_split_seeds_or_replicates_grow(tmp_path: Path) -> None:
    small = power(tmp_path, max_test=200)
    whole = power(tmp_path)
    more_seeds = power(tmp_path, "finetune.seeds=[1, 2, 3, 4, 5, 6, 7, 8]")
    replicated = power(tmp_path, "finetune.seeds=[1, 2, 3, 4, 5]", "pretrain.replicates=4")
    assert small.test_examples == 200 and whole.test_examples > 1000
    assert whole.detectable < small.detectable
    assert more_seeds.detectable < whole.detectable
    assert whole.source.startswith("prior") and whole.df == pytest.approx(design_se(PRIORS, 3, 1, whole.test_examples)[1])
    assert f"power {NER_TASK}: {whole.test_examples:,} test examples, 3 seed(s) x 1" in whole.line()
    assert "about this checkpoint, not the procedure" in whole.line()
    assert replicated.replicates == 4 and "not the procedure" not in replicated.line()


def test_a_design_too_weak_for_the_published_gains_says_it_cannot_answer(tmp_path: Path) -> None:
    weak = power(tmp_path, "finetune.seeds=[1, 2]", max_test=50)
    assert not weak.can_answer and "this design cannot answer" in weak.line() and "plan --detect" in weak.line()


def test_plan_and_the_report_give_the_same_detectable_difference_for_the_same_results(tmp_path: Path) -> None:
    """Once results exist, plan's figure is the report's: the same paired se and df, the same formula, the same
    family of comparisons."""
    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import load_run
    from domainbert.report.references import power_sentences

    run = tmp_path / "run"
    for seed, (base, cont, orig) in {1: (20, 14, 30), 2: (23, 13, 29), 3: (22, 17, 25), 4: (25, 15, 31)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
        write_ner_result(run, "original", NER_TASK, seed, orig)
    write_ner_result(run, "floor", NER_TASK, 0, 35)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    (planned,) = design_power(cfg, RunLayout(run))
    assert planned.source.startswith("measured")
    scores, rows = compare_tables(load_run(RunLayout(run), ["continued"]).finetune, cfg.compare, [], ["continued"], [])
    (line,) = power_sentences(scores, rows, ["continued"])
    assert f"is {100 * planned.detectable:.1f} points" in line
    reported = min(r["detectable"] for r in rows if r["model"] == "continued" and r["reference"] in ("base", "original"))
    assert planned.detectable == pytest.approx(reported, rel=1e-9)
    assert planned.comparisons == rows[0]["comparisons"]


def test_solve_design_finds_the_fewest_seeds_for_each_replicate_count() -> None:
    designs = solve_design(0.02, [1952], family=10, alpha=0.05)
    assert designs and designs[0].replicates == 1
    for d in designs:
        assert d.detectable <= 0.02
        fewer = detectable_difference(*design_se(PRIORS, d.seeds - 1, d.replicates, 1952), 0.05, 10)
        assert d.seeds == 2 or fewer > 0.02  # one seed fewer would not reach the target
    assert solve_design(1e-4, [1952], family=10, alpha=0.05) == []


def test_plan_detect_prints_the_fewest_seeds_for_the_page_and_for_one_preregistered_claim(tmp_path: Path) -> None:
    from domainbert.report.design import detect_lines

    cfg = config("pretrain.arms=[continued, control]")
    lines = detect_lines(cfg, RunLayout(tmp_path / "run"), 0.02, (60.0, 30.0))
    text = "\n".join(lines)
    assert lines[0].startswith("detect 2.0 points with 80% power (prior")
    page, one = text.split(" as one preregistered comparison:")
    assert "over the report's" in page and "a verdict about one checkpoint" in one
    first = next(line for line in one.splitlines() if "replicate(s) x" in line)
    seeds = int(first.split(" x ")[1].split(" seeds")[0])
    # the design it names reaches the target alone, and one seed fewer would not
    assert detectable_difference(*design_se(PRIORS, seeds, 1, 2000), 0.05, 1) <= 0.02
    assert detectable_difference(*design_se(PRIORS, seeds - 1, 1, 2000), 0.05, 1) > 0.02
    runs = seeds * 4  # base, original and the two arms
    assert f"{runs} fine-tuning runs" in first and f"about {(60 + runs * 30) / 3600:.1f} h" in first
    assert '"finetune.seeds=[1, 2, ' in one and '"pretrain.replicates=1"' in one
