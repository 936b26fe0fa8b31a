"""The design's power before the compute is spent (what `domainbert plan` prints per task), and that it is the
report's own figure once results exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.plan.design_power import design_power, solve_design
from domainbert.report.power import design_se, detectable_difference, task_prior
from support.report import NER_TASK, write_ner_result

SCORES = Path(__file__).resolve().parents[3] / "studies" / "scores"


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
    ner = task_prior("ner", whole.test_examples)
    assert whole.source.startswith("prior for ner") and (whole.se, whole.df) == pytest.approx(
        design_se(ner, 3, 1, whole.test_examples)
    )
    assert "(prior for ner, measured on science-terms-ner's 1,952 test examples" in whole.line()
    assert f"power {NER_TASK}: {whole.test_examples:,} test examples, 3 seed(s) x 1" in whole.line()
    assert "about this checkpoint, not the procedure" in whole.line()
    assert replicated.replicates == 4 and "not the procedure" not in replicated.line()


def test_a_design_too_weak_for_the_published_gains_says_it_cannot_answer(tmp_path: Path) -> None:
    weak = power(tmp_path, "finetune.seeds=[1, 2]", max_test=50)
    assert not weak.can_answer and "this design cannot answer" in weak.line() and "plan --detect" in weak.line()


def _four_seed_run(tmp_path: Path) -> Path:
    """A run folder with base, continued and original on 4 seeds of the NER task, and its floor."""
    run = tmp_path / "run"
    for seed, (base, cont, orig) in {1: (20, 14, 30), 2: (23, 13, 29), 3: (22, 17, 25), 4: (25, 15, 31)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
        write_ner_result(run, "original", NER_TASK, seed, orig)
    write_ner_result(run, "floor", NER_TASK, 0, 35)
    return run


def test_plan_and_the_report_give_the_same_detectable_difference_for_the_same_results(tmp_path: Path) -> None:
    """Once results exist, plan's figure is the report's: the same paired se and df, the same formula, the same
    family of comparisons."""
    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import load_run
    from domainbert.report.references import against_best_reference, power_sentences

    run = _four_seed_run(tmp_path)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    (planned,) = design_power(cfg, RunLayout(run))
    assert planned.source.startswith("measured")
    scores, rows = compare_tables(load_run(RunLayout(run), ["continued"]).finetune, cfg.compare, [], ["continued"], [])
    (line,) = power_sentences(scores, rows, ["continued"])
    assert f"is {100 * planned.detectable:.1f} points" in line
    # the least favourable comparison of the arm with the better reference, as the page names it
    reported = max(r.detectable for r in against_best_reference(scores, rows, "continued"))
    assert planned.detectable == pytest.approx(reported, rel=1e-9)
    assert planned.comparisons == rows[0].comparisons


def test_a_task_no_arm_ran_on_takes_its_noise_from_the_references_own_paired_comparison(tmp_path: Path) -> None:
    """A run of the two references only (study 10's R8): plan and the report's power line both read the task's
    noise from base - original, paired by seed, not from the stated prior; where the seed moves the two apart,
    that is far more than the prior says."""
    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import load_run
    from domainbert.report.references import power_sentences

    run = tmp_path / "run"
    for seed, (base, orig) in {1: (20, 29), 2: (30, 21), 3: (22, 27), 4: (28, 23)}.items():  # seeds pull apart
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "original", NER_TASK, seed, orig)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    (planned,) = design_power(cfg, RunLayout(run))
    assert planned.source == "measured: base vs original in this run"
    scores, rows = compare_tables(load_run(RunLayout(run), ["continued"]).finetune, cfg.compare, [], ["continued"], [])
    (line,) = power_sentences(scores, rows, ["continued"])
    assert "no arm was compared here; the references' own comparison (base - original; paired over 4 seeds" in line
    refs = next(r for r in rows if (r.model, r.reference) == ("base", "original"))
    assert f"detects {100 * refs.detectable:.1f} points" in line
    # the same paired se and df; plan sizes the configured run's family (its arm's comparisons too), the page its own
    assert (planned.se, planned.df) == pytest.approx((refs.se, refs.df), rel=1e-9)
    assert planned.comparisons > refs.comparisons and planned.detectable > refs.detectable
    assert detectable_difference(planned.se, planned.df, 0.05, refs.comparisons) == pytest.approx(
        refs.detectable
    )
    stated = power(tmp_path / "empty", "finetune.seeds=[1, 2, 3, 4]")
    assert stated.source.startswith("prior for ner") and planned.detectable > 2 * stated.detectable


def test_solve_design_finds_the_fewest_seeds_for_each_replicate_count() -> None:
    ner = task_prior("ner", 1952)
    designs = solve_design(0.02, [(ner, 1952)], family=10, alpha=0.05)
    assert designs and designs[0].replicates == 1
    for d in designs:
        assert d.detectable <= 0.02
        fewer = detectable_difference(*design_se(ner, d.seeds - 1, d.replicates, 1952), 0.05, 10)
        assert d.seeds == 2 or fewer > 0.02  # one seed fewer would not reach the target
    assert solve_design(1e-4, [(ner, 1952)], family=10, alpha=0.05) == []
    assert solve_design(0.02, [], family=10, alpha=0.05) == []


def test_solve_design_sizes_every_task_by_its_own_prior_and_the_weakest_decides(monkeypatch) -> None:
    """A 2,000-sentence NER task and a 375-example classification task: the classification task's prior is the
    wider, so it decides, though its split is not the only thing that differs (one replicate: a quick search)."""
    monkeypatch.setattr("domainbert.plan.design_power.MAX_REPLICATES", 1)
    ner, subject = (task_prior("ner", 2000), 2000), (task_prior("classification", 375), 375)
    both = solve_design(0.08, [ner, subject], family=1, alpha=0.05)
    assert both == solve_design(0.08, [subject], family=1, alpha=0.05)
    assert both[0].seeds > solve_design(0.08, [ner], family=1, alpha=0.05)[0].seeds
    # the same split size under the NER prior would have been sized far too small
    assert both[0].seeds > solve_design(0.08, [(task_prior("ner", 375), 375)], family=1, alpha=0.05)[0].seeds


def test_plan_s_prior_for_manpages_fr_section_is_near_what_its_report_measured() -> None:
    """Study 0's committed runs (4 seeds of base, continued and control on the 304-window macro-F1): the report's
    detectable difference, rescored here with the report's own code, against plan's figure for the same design
    under the task's stated prior; under science-terms-ner's prior (the one prior plan had before) it said under a
    third of it."""
    from domainbert.report.references import against_best_reference
    from domainbert.report.results import build_tables, default_compare_fn
    from studies.score_files import read_scores

    _, runs = read_scores(SCORES / "study-0-manpages-fr-recipe.json.gz")
    scores, rows = build_tables(runs, [], ["continued", "control"], [], default_compare_fn(1000, 0.95, 0), 0.95)
    reported = min(
        r.detectable for arm in ("continued", "control") for r in against_best_reference(scores, rows, arm)
    )
    family = rows[0].comparisons
    assert family == 6 and reported == pytest.approx(0.220, abs=0.002)  # studies/00-positive-control.md's second design
    planned = detectable_difference(*design_se(task_prior("classification", 304), 4, 1, 304), 0.05, family)
    assert 1 / 1.5 < planned / reported < 1.5
    blind = detectable_difference(*design_se(task_prior("ner", 1952), 4, 1, 304), 0.05, family)
    assert reported / blind > 3


def test_plan_gives_each_task_the_prior_of_its_type(tmp_path: Path) -> None:
    cfg = load_domain("science", ["pretrain.arms=[continued]"])
    by_task = {p.task: p for p in design_power(cfg, RunLayout(tmp_path / "run"))}
    ner, subject = by_task["science-terms-ner"], by_task["science-subject"]
    assert ner.source.startswith("prior for ner") and subject.source.startswith("prior for classification")
    assert f"manpages-fr-section's 304 test examples, scaled to {subject.test_examples:,}" in subject.line()
    expected = design_se(task_prior("classification", subject.test_examples), 3, 1, subject.test_examples)
    assert (subject.se, subject.df) == pytest.approx(expected)
    assert subject.detectable > ner.detectable


def test_plan_detect_prints_the_fewest_seeds_for_the_page_and_for_one_preregistered_claim(tmp_path: Path) -> None:
    from domainbert.plan.design_power import detect_lines

    cfg = config("pretrain.arms=[continued, control]")
    lines = detect_lines(cfg, RunLayout(tmp_path / "run"), 0.02, (60.0, 30.0))
    text = "\n".join(lines)
    assert lines[0] == "detect 2.0 points with 80% power on every task (the weakest decides):"
    assert lines[1].startswith(f" {NER_TASK}, 2,000 test examples (prior for ner, measured on science-terms-ner's")
    page, one = text.split(" as one preregistered comparison:")
    assert "over the report's" in page and "a verdict about one checkpoint" in one
    first = next(line for line in one.splitlines() if "replicate(s) x" in line)
    seeds = int(first.split(" x ")[1].split(" seeds")[0])
    # the design it names reaches the target alone, and one seed fewer would not
    ner = task_prior("ner", 2000)
    assert detectable_difference(*design_se(ner, seeds, 1, 2000), 0.05, 1) <= 0.02
    assert detectable_difference(*design_se(ner, seeds - 1, 1, 2000), 0.05, 1) > 0.02
    runs = seeds * 4  # base, original and the two arms
    assert f"{runs} fine-tuning runs" in first and f"about {(60 + runs * 30) / 3600:.1f} h" in first
    assert '"finetune.seeds=[1, 2, ' in one and '"pretrain.replicates=1"' in one


def test_plan_detect_sizes_a_task_with_results_by_this_run_s_own_paired_comparisons(
    tmp_path: Path, monkeypatch
) -> None:
    from domainbert.plan.design_power import detect_lines

    monkeypatch.setattr("domainbert.plan.design_power.MAX_REPLICATES", 1)  # a quick search: the prior is what is tested

    run = tmp_path / "run"
    for seed, (base, cont) in {1: (20, 14), 2: (23, 13), 3: (22, 17), 4: (25, 15)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    lines = detect_lines(cfg, RunLayout(run), 0.05, None)
    assert lines[1].startswith(f" {NER_TASK}, 2,000 test examples (measured on this run's 1 paired comparison(s)")


def test_plan_projects_a_run_s_measured_noise_to_a_design_with_more_seeds(tmp_path: Path) -> None:
    """Results of 4 seeds, a config of 8: plan does not print the 4-seed figure as the 8-seed design's; it takes
    the measured per-seed noise to 8 seeds, so the detectable difference shrinks, and says whence."""
    run = _four_seed_run(tmp_path)
    (four,) = design_power(config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]"), RunLayout(run))
    (eight,) = design_power(
        config("compare.bootstrap_samples=300", f"finetune.seeds={list(range(1, 9))}"), RunLayout(run)
    )
    assert (
        four.source.startswith("measured: ")
        and eight.source == "continued vs base's noise in this run, at this design"
    )
    assert eight.seeds == 8 and eight.df > four.df and eight.detectable < four.detectable


def test_a_detectable_difference_beyond_the_metric_s_range_is_said_to_detect_nothing(tmp_path: Path) -> None:
    """An untuned domain's saturated task scored 443.3 'points detectable' (seeds at 98 and 17): a figure past 100
    points says only that the design detects nothing, and the line says that instead of quoting it as a size."""
    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import load_run
    from domainbert.report.references import power_sentences

    run = tmp_path / "run"
    for seed, (base, cont) in {1: (50, 5), 2: (50, 95), 3: (51, 10), 4: (50, 90)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    scores, rows = compare_tables(load_run(RunLayout(run), ["continued"]).finetune, cfg.compare, [], ["continued"], [])
    detectable = next(r.detectable for r in rows if r.model == "continued")
    assert detectable > 1.0
    (line,) = power_sentences(scores, rows, ["continued"])
    assert line.startswith(f"{NER_TASK}: no difference this metric can show is detectable with 80% power")
    assert f"{100 * detectable:.1f} points, is more than the metric's whole range" in line
    assert "DAPT" not in line
    (planned,) = design_power(cfg, RunLayout(run))
    assert "comparisons, more than the metric's whole range: no difference it can show; " in planned.line()


def test_a_page_with_no_reference_gives_the_power_of_its_comparisons_between_arms(tmp_path: Path) -> None:
    """Study 14's page (scratch and continued, no reference fine-tuned) said only "No comparison with the
    reference had an interval" under Power, though it made a paired comparison of the two arms: the line now gives
    that comparison's detectable difference and its pairing."""
    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import load_run
    from domainbert.report.references import power_sentences

    run = tmp_path / "run"
    for seed, (scratch, cont) in {1: (17, 33), 2: (15, 32), 3: (19, 30), 4: (16, 34)}.items():
        write_ner_result(run, "scratch", NER_TASK, seed, scratch)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    arms = ["scratch", "continued"]
    scores, rows = compare_tables(load_run(RunLayout(run), arms).finetune, cfg.compare, [], arms, [])
    between = next(r for r in rows if (r.model, r.reference) == ("continued", "scratch"))
    (line,) = power_sentences(scores, rows, arms)
    assert line.startswith(f"{NER_TASK}: no reference was fine-tuned here; the smallest difference")
    pairing = f"paired over 4 seeds, r {between.design.seed_correlation:.2f}"
    assert line.endswith(f"is {100 * between.detectable:.1f} points (continued - scratch, {pairing}).")
    assert power_sentences(scores, rows, ["scratch"]) == []  # one arm alone: no comparison between arms
    for seed, control in {1: 31, 2: 33, 3: 29, 4: 35}.items():  # and the equal-token control: two comparisons
        write_ner_result(run, "control", NER_TASK, seed, control)
    arms = ["scratch", "continued", "control"]
    scores, rows = compare_tables(load_run(RunLayout(run), arms).finetune, cfg.compare, [], arms, [])
    pairs = [r for r in rows if r.model in arms and r.reference in arms]
    assert len(pairs) == 2
    (line,) = power_sentences(scores, rows, arms)
    assert f"is {100 * min(r.detectable for r in pairs):.1f} points (" in line
    for r in pairs:
        assert f"{r.model} - {r.reference} {100 * r.detectable:.1f}, paired over 4 seeds" in line


def test_plan_measures_no_noise_from_results_this_configuration_would_not_use(tmp_path: Path) -> None:
    """Study 14's plan read its noise from 'scratch vs base in this run', though base's results there were stale
    under its configuration and the page left them out. A result recorded under another fingerprint is not this
    design's noise: plan falls back to the task's prior, as the report leaves the result out."""
    import shutil

    from domainbert.core.artifacts import atomic_output

    run = tmp_path / "run"
    for seed, (base, orig) in {1: (20, 29), 2: (30, 21), 3: (22, 27), 4: (28, 23)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "original", NER_TASK, seed, orig)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    (measured,) = design_power(cfg, RunLayout(run))
    assert measured.source == "measured: base vs original in this run"
    for seed in (1, 2, 3, 4):  # base's results: now recorded, under another recipe's fingerprint, so stale
        folder = run / "finetune" / "base" / NER_TASK / f"seed-{seed}"
        with atomic_output(folder, config={"recipe": "another"}, fp="another recipe's fingerprint") as tmp:
            shutil.copy(folder / "result.json", tmp / "result.json")
    (planned,) = design_power(cfg, RunLayout(run))
    assert planned.source.startswith("prior for ner")


def test_the_power_line_names_the_least_favourable_arm_and_the_range_its_seeds_allow(tmp_path: Path) -> None:
    """Two arms against the reference: the page's one figure is the arm whose comparison detects least (not the
    best one), and since its se comes from the run's own 4 seeds, the line gives the range that spread allows."""
    from scipy import stats

    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import load_run
    from domainbert.report.power import detectable_difference
    from domainbert.report.references import against_best_reference, power_sentences

    run = _four_seed_run(tmp_path)
    for seed, control in {1: (21), 2: (30), 3: (16), 4: (27)}.items():  # control moves apart from base by seed
        write_ner_result(run, "control", NER_TASK, seed, control)
    cfg = config("compare.bootstrap_samples=300", "finetune.seeds=[1, 2, 3, 4]")
    arms = ["continued", "control"]
    scores, rows = compare_tables(load_run(RunLayout(run), arms).finetune, cfg.compare, [], arms, [])
    own = {a: next(iter(against_best_reference(scores, rows, a))) for a in arms}
    weakest = max(own.values(), key=lambda r: r.detectable)
    strongest = min(own.values(), key=lambda r: r.detectable)
    assert weakest.detectable > strongest.detectable
    (line,) = power_sentences(scores, rows, arms)
    assert f"is {100 * weakest.detectable:.1f} points for the least favourable arm, {weakest.model}" in line
    # the range: the detectable difference at the 95% chi-square bounds of the se estimated on its df
    df, se, family = weakest.df, weakest.se, weakest.comparisons
    low = detectable_difference(se * (df / stats.chi2.ppf(0.975, df)) ** 0.5, df, 0.05, family)
    high = detectable_difference(se * (df / stats.chi2.ppf(0.025, df)) ** 0.5, df, 0.05, family)
    assert low < weakest.detectable < high
    top = f"{100 * high:.1f}" if high < 1.0 else "past the metric's whole range"  # a range no F1 can reach
    assert f"; {100 * low:.1f} to {top} given 4 seeds' spread (95%)" in line
