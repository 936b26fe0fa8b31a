"""``finetune.save_models: best`` (the default): per model and task the seed best on validation is kept as a
Hugging Face folder that loads with stock classes; results made without models rerun only the best seed."""

from __future__ import annotations

import json

from huggingface_hub import ModelCard

from domainbert.cli import run_cli
from domainbert.core.artifacts import read_record
from domainbert.core.paths import RunLayout
from domainbert.finetune.best_model import group_fingerprints, held_seed, winner
from domainbert.finetune.export import MODEL
from domainbert.finetune.jobs import Job
from domainbert.finetune.matrix import finetune_all
from domainbert.finetune.stage import expected_results
from domainbert.task_data.splits import load_task
from support.finetune import cfg_overrides, make_cfg, predict_labels


def _result(val: float) -> dict:
    return {"validation": {"f1": val}, "primary_metric": "f1"}


def test_winner_is_the_best_validation_score_and_a_tie_goes_to_the_lower_seed():
    assert winner({1: _result(0.5), 2: _result(0.7), 3: _result(0.6)}) == 2
    assert winner({3: _result(0.7), 2: _result(0.7), 1: _result(0.1)}) == 2
    assert winner({}) is None


def test_a_collapsed_run_is_never_the_winner_however_it_scored_on_validation():
    collapsed = {**_result(0.9), "collapsed": True}
    assert winner({1: collapsed, 2: _result(0.3)}) == 2
    assert winner({1: collapsed}) is None  # nothing kept, nothing to push


def _val(layout: RunLayout, task: str, seed: int) -> float:
    result = json.loads((layout.finetune("base", task, seed) / "result.json").read_text())
    return result["validation"][result["primary_metric"]]


def test_the_best_seed_is_kept_loads_with_stock_classes_and_predicts_its_runs_answers(
    tmp_path,
    tiny_bert,
    tasks_dir,  # noqa: F811
    monkeypatch,
    capsys,
):
    extra = ["finetune.seeds=[3, 2, 1]", "finetune.epochs=1", 'finetune.only_tasks=["ner"]', "finetune.floor=false"]
    cfg = make_cfg(tiny_bert, tasks_dir, *extra)
    assert cfg.finetune.save_models == "best"
    layout = RunLayout(tmp_path / "run")
    results = {r["seed"]: r for r in finetune_all(cfg, layout)}
    best = max(results, key=lambda s: (results[s]["validation"]["f1"], -s))
    assert best != 3  # seed 3 ran first: a later seed's offer had to replace its model
    folder = layout.finetuned_model("base", "ner")
    assert read_record(folder)["config"]["seed"] == best
    assert not [s for s in results if (layout.finetune("base", "ner", s) / MODEL).exists()]  # only the kept one
    card = ModelCard.load(folder / "README.md")
    assert f"Seed {best} was kept" in card.text and "of seeds 1, 2, 3." in card.text
    assert card.data.model_name == f"domainbert-{cfg.name}-base-ner"

    task = next(t for t in cfg.finetune.tasks if t.name == "ner")
    examples = load_task(task).splits["test"][:6]
    assert predict_labels(folder, task, examples, custom=False) == results[best]["pred"][:6]  # stock class, no remote code

    # Another learning rate: the kept model's run is no longer current, so it is held by no seed.
    changed = make_cfg(tiny_bert, tasks_dir, *extra, "finetune.lr=0.001")
    job = Job("base", str(tiny_bert), "ner", best, "finetune")
    assert held_seed(layout, job, group_fingerprints(changed, job, None)) is None

    # push publishes the kept folder with the card on disk; under another configuration it refuses.
    monkeypatch.chdir(tmp_path)
    args = ["push", "science", "--finetuned", "base/ner", "--repo", "org/m", "--out", str(layout.root), "--dry-run"]
    assert run_cli([*args, *cfg_overrides(tiny_bert, tasks_dir, *extra)]) == 0
    out = capsys.readouterr().out
    assert "(repo type model)" in out and "  model.safetensors\n" in out and "_domainbert" not in out
    assert (folder / "README.md").read_text().rstrip() in out
    assert run_cli([*args, *cfg_overrides(tiny_bert, tasks_dir, *extra, "finetune.lr=0.001")]) == 2
    assert "another configuration" in capsys.readouterr().err
    assert run_cli([*args[:3], "base", *args[4:], *cfg_overrides(tiny_bert, tasks_dir, *extra)]) == 2
    assert "MODEL/TASK" in capsys.readouterr().err
    # The base here is a local folder with no Hub id: the card names none, and push says how to name one.
    assert run_cli([*args, *cfg_overrides(tiny_bert, tasks_dir, *extra)]) == 0
    assert "note: the card names no base_model (base has no Hub id)" in capsys.readouterr().out
    assert run_cli([*args, "--base-repo", "org/base", *cfg_overrides(tiny_bert, tasks_dir, *extra)]) == 0
    uploaded = capsys.readouterr().out.split("--- README.md (the card uploaded) ---\n", 1)[1]
    data = ModelCard(uploaded.split("\n--- end of card ---", 1)[0]).data.to_dict()
    assert (data["base_model"], data["base_model_relation"]) == ("org/base", "finetune") and "note:" not in uploaded


def test_results_without_models_rerun_only_the_best_seed(tmp_path, tiny_bert, tasks_dir, caplog):  # noqa: F811
    extra = ["finetune.seeds=[1, 2, 3]", "finetune.epochs=1", 'finetune.only_tasks=["cls"]', "finetune.floor=false"]
    none = make_cfg(tiny_bert, tasks_dir, *extra, "finetune.save_models=none")
    best = make_cfg(tiny_bert, tasks_dir, *extra)
    layout = RunLayout(tmp_path / "run")
    finetune_all(none, layout)
    assert not layout.finetuned_model("base", "cls").exists()
    vals = {s: _val(layout, "cls", s) for s in (1, 2, 3)}
    top = max(vals, key=lambda s: (vals[s], -s))
    states = {e["seed"]: e["state"] for e in expected_results(best, layout) if e["model"] == "base"}
    assert states == {s: "no model" if s == top else "current" for s in (1, 2, 3)}

    mtimes = {s: (layout.finetune("base", "cls", s) / "result.json").stat().st_mtime_ns for s in (1, 2, 3)}
    caplog.set_level("INFO")
    finetune_all(best, layout)
    rerun = {
        s for s in (1, 2, 3) if (layout.finetune("base", "cls", s) / "result.json").stat().st_mtime_ns != mtimes[s]
    }
    assert rerun == {top}
    assert read_record(layout.finetuned_model("base", "cls"))["config"]["seed"] == top
    assert {e["state"] for e in expected_results(best, layout) if e["model"] == "base"} == {"current"}
    # The report names the kept model; under another configuration it no longer does.
    from domainbert.report.compare import render_report

    render_report(best, layout)
    assert f"finetune/base/cls/best (seed {top})" in (layout.report / "report.md").read_text()
    (layout.root / "finetune" / "expected.json").unlink()  # as the flows leave a run: the config's list is used
    render_report(best, layout)
    assert f"finetune/base/cls/best (seed {top})" in (layout.report / "report.md").read_text()
    from domainbert.finetune.expectations import write_expected

    write_expected(make_cfg(tiny_bert, tasks_dir, *extra, "finetune.lr=0.001"), layout)  # what a new run expects
    # fewer results than the report in report/ uses: this one is written beside it
    assert "/best (seed" not in render_report(best, layout).with_name("report.md").read_text()
    # The default head is transformers' own: the kept classifier predicts as its run did, without remote code.
    kept = layout.finetuned_model("base", "cls")
    assert "trust_remote_code" not in (kept / "README.md").read_text() and not (kept / "modeling_mean_pool.py").exists()
    task = next(t for t in best.finetune.tasks if t.name == "cls")
    examples = load_task(task).splits["test"][:6]
    assert predict_labels(kept, task, examples, custom=False) == json.loads(
        (layout.finetune("base", "cls", top) / "result.json").read_text())["pred"][:6]
