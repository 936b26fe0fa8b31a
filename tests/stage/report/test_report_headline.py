"""The report's headline: the models x tasks table (best in bold, floor row, collapsed runs marked), the
verdict with its caveats, and the summary sentences about the floor and collapsed runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.report.compare import render_report
from support.report import NER_TASK, comparison, judged, score, write_json, write_ner_result


@pytest.fixture
def run(science_run: Path) -> Path:
    write_ner_result(science_run, "floor", NER_TASK, 0, 10)  # the floor misses 10: between continued and base
    for seed in (1, 2, 3):  # scratch collapsed on every seed
        path = science_run / "finetune" / "scratch" / NER_TASK / f"seed-{seed}" / "result.json"
        result = json.loads(path.read_text())
        result["collapsed"] = True
        result["retry"] = {"lr": 1e-5, "first": {"lr": 1e-4}} if seed == 1 else None
        path.write_text(json.dumps(result))
    manifest = json.loads((science_run / "corpus" / "manifest.json").read_text())
    manifest["audit"] = {"enabled": True, "allow_leaks": False, "not_checked": {"hub-task/test": "offline"},
                         "by_task_split": {f"{NER_TASK}/test": {"texts": 400, "verbatim": 0,
                                                                "texts_with_ngram_hits": 2}}}
    write_json(science_run / "corpus" / "manifest.json", manifest)
    write_json(science_run / "pretrain" / "base-warmup" / "summary.json", {
        "train": "head", "converged": True, "from_machine_cache": False,
        "steps": 40, "tokens": 81920, "wall_seconds": 21.0, "trainable_parameters": 178000,
        "domain_perplexity_random_head": 45000.0, "domain_perplexity": 90.5,
        "general_perplexity_random_head": 47000.0, "general_perplexity": 30.25})
    return science_run


def test_headline_table_verdict_and_caveats(run: Path) -> None:
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, extended, scratch]"])
    render_report(cfg, RunLayout(run))
    md = (run / "report" / "report.md").read_text()
    html = (run / "report" / "report.html").read_text()
    assert md.index("## Headline") < md.index("## Summary")  # the report opens with it
    results = json.loads((run / "report" / "results.json").read_text())
    score = {r["model"]: r for r in results["scores"]}
    best = score["continued"]  # the highest mean; bold only where the comparisons call it better than each other
    cell = f"{100 * best['mean']:.1f} ± {100 * best['std']:.1f}"
    sure = all(any(c["model"] == "continued" and c["reference"] == m and c["verdict"] == "better"
                   or c["model"] == m and c["reference"] == "continued" and c["verdict"] == "worse"
                   for c in results["comparisons"]) for m in score if m not in ("continued", "floor"))
    assert (f"| continued | **{cell}** |" in md) is sure and (f"<strong>{cell}</strong>" in html) is sure
    assert (f"| continued | {cell} |" in md) is not sure
    assert str(run) not in md and str(run) not in html  # a shareable page: no path of this machine
    assert "seeds 1, 2, 3)" in md  # the floor's one run is not a seed
    assert f"| floor | {100 * score['floor']['mean']:.1f} |" in md  # one deterministic run: no ± and never bold
    assert "(collapsed 3/3) (retried 1)" in md
    # The floor sits above base and scratch: both are named, and the floor is compared with every model.
    assert "Below the floor on science-terms-ner" in md and "base " in md.split("Below the floor on")[1][:200]
    assert any(c["reference"] == "floor" and c["model"] == "continued" for c in results["comparisons"])
    # No sentence states the scratch difference without the collapse.
    for line in md.splitlines():
        if line.startswith("- scratch") and "base" in line:
            assert "collapsed" in line, line
    assert "Collapsed runs (constant predictions or a loss that did not fall): scratch on science-terms-ner: 3 of 3" in md
    assert "one was trained until its general-text perplexity stopped falling, 40 steps (81,920 tokens, 21 s, encoder frozen)" in md
    assert "too small to conclude" in md  # 40,960 tokens per arm is far below the published budgets
    assert "| base, MLM head warmed up (converged) | 40 | 81,920 |" in md
    assert "random head 45,000.0 -> 90.5" in md
    assert "0 evaluation text(s) found verbatim. Not checked: hub-task/test (offline)." in md
    assert f"| {NER_TASK}/test | 400 | 0 | 2 |" in md


def test_bold_marks_only_a_mean_significantly_above_every_other_model() -> None:
    from domainbert.report.headline import headline_table

    scores = [score(t, m, v) for t in ("a", "b") for m, v in (("base", 0.30), ("continued", 0.40), ("tapt", 0.35))]
    sure = [judged(t, "continued", "base", "better") for t in ("a", "b")]
    sure += [judged("a", "tapt", "continued", "worse"), judged("b", "continued", "tapt", "no significant difference")]
    rows = {r[0]: r[1:] for r in headline_table(scores, ["continued", "tapt"], [], set(), sure).rows}
    assert rows["continued"] == ["**40.0 ± 1.0**", "40.0 ± 1.0"]  # b: not significantly above tapt
    assert not any("**" in c for m in ("base", "tapt") for c in rows[m])
    rows = {r[0]: r[1:] for r in headline_table(scores, ["continued", "tapt"], [], {"a"}, sure).rows}
    assert rows["continued"] == ["40.0 ± 1.0", "40.0 ± 1.0"]  # a cannot separate the arms: nothing in bold


def test_a_run_that_fine_tuned_no_arm_says_so_rather_than_that_none_beat_the_base() -> None:
    """Study 9 ran the checkpoint alone (finetune.only_models=[original]); its page said no arm beat the base."""
    from domainbert.report.verdict import decide

    scores = [score("t", m, v) for m, v in (("original", 0.85), ("floor", 0.68))]
    for arms in ([], ["continued"]):  # a configured arm that only_models left out has no scores
        assert decide(scores, [], arms, [], []).kind == "no-arm"
    scores.append(score("t", "continued", 0.84))
    verdict = decide(scores, [], ["continued"], [], [])
    assert (verdict.kind, verdict.reference) == ("no-gain", "the original checkpoint")
    scores.append(score("t", "base", 0.83))
    verdict = decide(scores, [], ["continued"], [], [])
    assert (verdict.kind, verdict.reference) == ("no-gain", "the better reference (original)")
    assert verdict.line == "Verdict: no adaptation arm beat the better reference (original) on any task at this budget."


def test_a_run_that_fine_tuned_no_reference_says_so_rather_than_that_no_arm_beat_the_base() -> None:
    """Study 12 fine-tuned the from-scratch arm alone (finetune.only_models=[scratch]); its page said no arm beat
    the base model, which it had not run."""
    from domainbert.report.verdict import decide

    scores = [score("t", m, v) for m, v in (("scratch", 0.71), ("floor", 0.69))]
    verdict = decide(scores, [], ["scratch"], [], [])
    assert (verdict.kind, verdict.between) == ("no-reference", False)
    assert verdict.line.startswith("Verdict: none: no reference (base or original) was fine-tuned in this run")
    # study 14 (scratch and continued): the page's paired comparison of the two arms is named in the lead
    scores.append(score("t", "continued", 0.78))
    between = [comparison(None, 0.02, 0.12, 0.07, task="t", reference="scratch")]
    verdict = decide(scores, between, ["scratch", "continued"], [], [])
    assert (verdict.kind, verdict.between) == ("no-reference", True)
    assert verdict.line.endswith(", and the arms with each other (below).")
    scores.append(score("t", "base", 0.70))
    verdict = decide(scores, [], ["scratch"], [], [])
    assert (verdict.kind, verdict.reference) == ("no-gain", "the base model")


def test_above_the_floor_says_for_which_models_significantly() -> None:
    from domainbert.report.summary import above_floor

    scores = [score("t", m, v) for m, v in (("base", 0.3), ("tapt", 0.31), ("floor", 0.2))]
    vs = [judged("t", m, "floor", "no significant difference") for m in ("base", "tapt")]
    assert above_floor(scores, vs).endswith("significantly for none (no difference from it survives the correction for the page's comparisons).")
    vs[1] = judged("t", "tapt", "floor", "better")
    assert above_floor(scores, vs).endswith("significantly on every task for tapt only.")
    vs[0] = judged("t", "base", "floor", "better")
    assert above_floor(scores, vs).endswith("on every task; each significantly.")


def test_floor_sentence_says_which_models_are_significantly_above_it() -> None:
    from domainbert.report.summary import floor_sentences

    scores = [score("t", m, v) for m, v in (("base", 0.30), ("continued", 0.29), ("floor", 0.24))]
    comparisons = [judged("t", "base", "floor", "better"), judged("t", "continued", "floor", "no significant difference")]
    (line,) = floor_sentences(scores, comparisons)
    assert line == ("Every model's mean is above the floor on t (24.0 F1); significantly for base, not significantly "
                    "for continued (the interval crosses 0 once the page's comparisons are corrected for).")
    comparisons[1] = judged("t", "continued", "floor", "better")
    assert floor_sentences(scores, comparisons)[0].endswith("(24.0 F1), each significantly.")


def test_a_degenerate_run_recorded_as_healthy_is_marked_collapsed_in_every_table(science_run: Path) -> None:
    """A tagger that put an entity on every token, recorded with ``collapsed: false`` (an older rule): the report
    judges its stored predictions again, so no table or sentence shows its score as an effect without the mark."""
    for seed in (1, 2, 3):
        path = science_run / "finetune" / "scratch" / NER_TASK / f"seed-{seed}" / "result.json"
        result = json.loads(path.read_text())
        result["pred"] = [["B-TERM"] * len(tags) for tags in result["gold"]]
        result["collapsed"], result["collapse"] = False, {"collapsed": False, "reasons": []}
        path.write_text(json.dumps(result))
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, extended, scratch]"])
    render_report(cfg, RunLayout(science_run))
    md = (science_run / "report" / "report.md").read_text()
    headline = md.split("## Headline")[1].split("\n## ")[0]
    scratch_row = next(line for line in headline.splitlines() if line.startswith("| scratch"))
    assert "collapsed 3/3" in scratch_row
    assert "scratch on " in headline and "3 of 3" in headline  # the collapse caveat names it
    comparisons = md.split("## Fine-tuning results")[1]
    assert all("collapsed runs involved" in line for line in comparisons.splitlines() if line.startswith("| scratch vs"))


def test_the_caveats_name_split_overlap_and_unusual_settings(science_run: Path) -> None:
    for model in ("base", "continued"):
        path = science_run / "finetune" / model / NER_TASK / "seed-1" / "result.json"
        result = json.loads(path.read_text())
        result["split_overlap"] = {"validation": {"exact": 0, "normalised": 0},
                                   "test": {"exact": 10, "normalised": 12}, "excluded": True}
        path.write_text(json.dumps(result))
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.lr=5e-3"])
    render_report(cfg, RunLayout(science_run))
    headline = (science_run / "report" / "report.md").read_text().split("## Headline")[1].split("\n## ")[0]
    assert f"{NER_TASK}: examples also in its training split: test 12 (10 verbatim); left out of scoring" in headline
    assert "Unusual setting: pretrain: the continued arm trains at a peak learning rate of 0.005" in headline
    assert "set by pretrain.lr" in headline


def test_a_general_perplexity_that_falls_too_is_named_as_head_training() -> None:
    """The demo's figures of issue #23: domain 1,213 -> 242 and general 1,782 -> 973 during continued
    pretraining: part of the domain drop is the head still learning, and the report says so; an arm whose
    general perplexity held still draws no such sentence."""
    from domainbert.report.headline import head_training_caveats
    from domainbert.report.inputs import RunArtifacts

    arts = RunArtifacts(Path("run"), pretrain={
        "continued": {"domain_perplexity_before": 1213.0, "domain_perplexity": 242.0,
                      "general_perplexity_before": 1782.0, "general_perplexity": 973.0},
        "extended": {"domain_perplexity_before": 1100.0, "domain_perplexity": 300.0,
                     "general_perplexity_before": 1800.0, "general_perplexity": 1750.0}})
    [sentence] = head_training_caveats(arts, ["continued", "extended"])
    assert sentence.startswith("continued: general-text perplexity fell too (1,782 -> 973, 45%)")
    assert "domain over general perplexity 0.68 -> 0.25" in sentence
    # An encoder from scratch (or an RTD generator) learns everything from nothing: no warmed-up head to blame.
    falling = dict(arts.pretrain["continued"])
    arts.pretrain["scratch"] = {**falling, "start_head": "random"}
    arts.pretrain["electra"] = {**falling, "objective": "rtd"}
    assert [s.split(":")[0] for s in head_training_caveats(arts, ["continued", "scratch", "electra"])] == ["continued"]


def test_tapt_budget_is_told_in_passes_over_the_task_text_and_the_corpus_budget_only_for_corpus_arms() -> None:
    from domainbert.report.headline import budget_caveats
    from domainbert.report.inputs import RunArtifacts

    arts = RunArtifacts(Path("run"), pretrain={
        "continued": {"tokens_consumed": 98304, "data": "corpus"},
        "tapt": {"tokens_consumed": 102400, "data": "task", "task_text_tokens": 25600},
        "dapt-tapt": {"tokens_consumed": 2_560_000, "data": "task", "task_text_tokens": 25600}})
    corpus, tapt, dapt_tapt = budget_caveats(arts, ["continued", "tapt", "dapt-tapt"])
    assert corpus.startswith("Pretraining budget: 98,304 tokens per arm")  # the TAPT arms' tokens not counted
    assert tapt.startswith("tapt: 102,400 tokens, 4.0 passes over the 25,600-token task text")
    assert "Fewer passes than published" in tapt and "Fewer passes" not in dapt_tapt  # 100 passes: as published


def test_the_warmup_sentence_says_whether_the_whole_base_or_its_head_was_trained() -> None:
    from domainbert.report.headline import warmup_sentence

    warm = {"train": "full", "steps": 200, "tokens": 409600, "wall_seconds": 190.0, "from_machine_cache": True,
            "general_perplexity_random_head": 45783.0, "general_perplexity": 223.0,
            "domain_perplexity_random_head": 46866.0, "domain_perplexity": 943.0}
    full = warmup_sentence(warm, "for a fixed number of steps")
    assert "the whole model was first pretrained as a masked-LM" in full and "'base' of every comparison" in full
    assert "served from this machine's cache" in full and "45,783 (random head) -> 223" in full
    head = warmup_sentence({**warm, "train": "head", "from_machine_cache": False}, "for a fixed number of steps")
    assert "one was trained for a fixed number of steps, 200 steps (409,600 tokens, 190 s, encoder frozen)" in head


def test_no_verdict_for_a_model_whose_expected_results_are_missing(run: Path) -> None:
    import shutil

    from domainbert.report.compare import checked_run
    from domainbert.report.verdict import incomplete_models

    shutil.rmtree(run / "finetune" / "continued" / NER_TASK / "seed-3")
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]"])
    md = render_report(cfg, RunLayout(run)).with_name("report.md")
    headline = md.read_text().split("## Headline")[1].split("\n## ")[0]
    first = next(line for line in headline.splitlines() if line.strip())
    check = checked_run(cfg, RunLayout(run)).result_check
    assert check is not None and f"continued/{NER_TASK}/seed-3" in check.missing
    assert incomplete_models(check, {NER_TASK}) == ["continued"]
    assert first.startswith("Incomplete: continued:") and "no verdict for them" in first
    verdict = headline[headline.index("Verdict:"):headline.index("Caveats:")]
    assert "continued" not in verdict and "scratch" in verdict, verdict

    shutil.rmtree(run / "finetune" / "base" / NER_TASK / "seed-1")
    md = render_report(cfg, RunLayout(run)).with_name("report.md")  # less complete: beside report/, not over it
    assert md.parent != run / "report"
    headline = md.read_text().split("## Headline")[1].split("\n## ")[0]
    assert incomplete_models(checked_run(cfg, RunLayout(run)).result_check, {NER_TASK}) == ["base", "continued"]
    assert "Incomplete: base, continued:" in headline and "no verdict for any model" in headline
    assert "Verdict: withheld until" in headline
    assert "beat the base model" not in headline


def test_report_command_renders_the_runs_own_overrides_and_says_when_it_drops_results(
    run: Path, capsys, caplog
) -> None:
    import shutil

    from domainbert.cli import run_cli
    from domainbert.config.domain import save_resolved_config

    overrides = ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]"]
    save_resolved_config(run, "science", "offline", overrides, load_domain("science", overrides))
    assert run_cli(["report", "science", "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"as the run was made: profile offline, overrides {overrides}" in err and "warning" not in err
    models = {s["model"] for s in json.loads((run / "report" / "results.json").read_text())["scores"]}
    assert {"base", "continued", "scratch", "floor"} <= models

    shutil.rmtree(run / "finetune" / "continued" / NER_TASK / "seed-2")
    good = (run / "report" / "report.md").read_text()
    with caplog.at_level("WARNING", logger="domainbert"):
        assert run_cli(["report", "science", "--out", str(run)]) == 0
    captured = capsys.readouterr()
    [beside] = [p for p in run.glob("report-*") if p.is_dir()]
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"this report uses 9 fine-tuning results where {run / 'report'} uses 10" in line
    assert f"written beside it to {beside}" in line and f"report: {beside / 'report.html'}" in captured.out
    assert (run / "report" / "report.md").read_text() == good  # the more complete report is not replaced
    assert "Incomplete: continued" in (beside / "report.md").read_text()


def test_report_overrides_go_on_top_of_the_runs_own_and_leave_cards_alone(run: Path, capsys) -> None:
    """`report` with the override docs/outputs.md suggests keeps the run's recorded overrides: without them the
    run's own arms and seeds would count as missing, and a withheld verdict would replace a good report."""
    from domainbert.cli import run_cli
    from domainbert.config.domain import save_resolved_config

    overrides = ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]"]
    save_resolved_config(run, "science", "offline", overrides, load_domain("science", overrides))
    assert run_cli(["report", "science", "--out", str(run)]) == 0
    first = json.loads((run / "report" / "results.json").read_text())
    card = run / "pretrain" / "continued" / "model" / "README.md"
    card.parent.mkdir(parents=True, exist_ok=True)
    card.write_text("the pretraining stage's card\n")
    capsys.readouterr()

    assert run_cli(["report", "science", "--out", str(run), "tracking.report_to=[tensorboard, mlflow]"]) == 0
    captured = capsys.readouterr()
    assert f"overrides {overrides}, with ['tracking.report_to=[tensorboard, mlflow]'] on top" in captured.err
    assert "written beside" not in captured.err and f"report: {run / 'report' / 'report.html'}" in captured.out
    assert json.loads((run / "report" / "results.json").read_text())["scores"] == first["scores"]
    assert "Verdict: withheld" not in (run / "report" / "report.md").read_text()
    assert card.read_text() == "the pretraining stage's card\n"


def test_the_rendered_report_is_kept_with_the_runs_mlflow_experiment(run: Path) -> None:
    from mlflow import MlflowClient

    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]",
                                  "tracking.report_to=[mlflow]"])
    render_report(cfg, RunLayout(run))
    client = MlflowClient(tracking_uri=f"sqlite:///{run / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("domainbert-science")
    [tracked] = client.search_runs([experiment.experiment_id])
    assert tracked.info.run_name == "report" and tracked.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(tracked.info.run_id)} == {"report.html", "report.md", "results.json"}
    assert experiment.artifact_location.startswith(run.resolve().as_uri())


def test_below_the_floor_follows_the_same_rule_as_above_it() -> None:
    from domainbert.report.summary import floor_lead, floor_sentences

    scores = [score("t", m, v) for m, v in (("base", 0.20), ("continued", 0.23), ("floor", 0.24))]
    vs = [judged("t", "base", "floor", "worse"), judged("t", "continued", "floor", "no significant difference")]
    assert floor_lead(scores, vs) == ("Significantly below the floor on at least one task: base; mean below the "
                                      "floor on at least one task, not significantly: continued.")
    (line,) = floor_sentences(scores, vs)
    assert line.endswith("base 20.0 (significantly), continued 23.0 (not significantly).")


def test_the_control_s_falling_general_perplexity_is_not_called_a_head_still_learning() -> None:
    from types import SimpleNamespace

    from domainbert.report.headline import head_training_caveats

    fell = {"domain_perplexity_before": 1253.0, "domain_perplexity": 975.0, "general_perplexity_before": 361.0,
            "general_perplexity": 296.0, "start_head": "warmed-up"}
    arts = SimpleNamespace(pretrain={"continued": {**fell, "data": "corpus"}, "control": {**fell, "data": "general"}})
    (line,) = head_training_caveats(arts, ["continued", "control"])  # type: ignore[arg-type]
    assert line.startswith("continued: general-text perplexity fell too")


def test_arms_with_their_own_budgets_are_each_named_and_the_caveat_weighs_the_smallest() -> None:
    from domainbert.report.headline import budget_caveats
    from domainbert.report.inputs import RunArtifacts

    arts = RunArtifacts(Path("run"), pretrain={
        "continued": {"tokens_consumed": 86016, "data": "corpus"},
        "scratch": {"tokens_consumed": 24_576_000, "data": "corpus"}})
    [line] = budget_caveats(arts, ["continued", "scratch"])
    assert line.startswith("Pretraining budgets differ by arm (continued 86,016, scratch 24,576,000 tokens")
    assert "not at equal compute" in line and "the smallest: 86,016 tokens" in line
    assert "too small to conclude" in line  # 86,016 tokens is far under every published budget
