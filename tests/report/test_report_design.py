"""The design's power before the compute is spent (what `domainbert plan` prints per task)."""

from __future__ import annotations

from pathlib import Path

from report_fixtures import NER_TASK, write_ner_result

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.report.design import design_power


def power(tmp_path: Path, *overrides: str, max_test: int | None = None):
    cfg = load_domain("science", ["finetune.only_tasks=[science-terms-ner]", *overrides])
    cfg.finetune.tasks[0] = cfg.finetune.tasks[0].model_copy(update={"max_test_examples": max_test})
    (one,) = design_power(cfg, RunLayout(tmp_path / "run"))
    return one


def test_the_detectable_difference_shrinks_when_the_test_split_or_the_seeds_grow(tmp_path: Path) -> None:
    small = power(tmp_path, max_test=200)
    whole = power(tmp_path)
    more_seeds = power(tmp_path, "finetune.seeds=[1, 2, 3, 4, 5, 6, 7, 8]")
    assert small.test_examples == 200 and whole.test_examples > 1000
    assert whole.detectable < small.detectable
    assert more_seeds.detectable < whole.detectable
    assert whole.seed_sd_source.startswith("prior")
    assert f"power {NER_TASK}: {whole.test_examples:,} test examples" in whole.line()


def test_a_design_too_weak_for_the_published_gains_says_it_cannot_answer(tmp_path: Path) -> None:
    weak = power(tmp_path, "finetune.seeds=[1]", max_test=50)
    assert not weak.can_answer and "this design cannot answer" in weak.line()


def test_the_base_s_measured_seed_spread_replaces_the_prior(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for seed, misses in ((1, 2), (2, 12), (3, 22)):  # a wide spread: 40 sentences, 2 to 22 missed
        write_ner_result(run, "base", NER_TASK, seed, misses)
    measured = power(tmp_path)
    assert measured.seed_sd_source == "measured on this run's base" and measured.seed_sd > 0.1
    assert measured.detectable > power(tmp_path / "empty").detectable
