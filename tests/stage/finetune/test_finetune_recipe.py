"""The learning rate chosen on validation (``finetune.lr_grid``): the reference is fine-tuned once per rate under
the first seed, the rate that scored best on validation wins, and every model of the comparison then trains at
it (its results record it); a rerun searches nothing again, and a task with its own rate is not searched."""

from __future__ import annotations

import json
import re

from domainbert.cli import run_cli
from domainbert.core.paths import RunLayout
from domainbert.finetune import recipe
from domainbert.finetune.jobs import run_record, task_config, task_lr
from domainbert.finetune.matrix import finetune_all
from support.finetune import cfg_overrides, make_cfg

GRID = "finetune.lr_grid=[0.00001, 0.003]"  # far apart: the tiny tasks learn only at the second


def _matrix(setting: str, tmp_path, tiny_bert, tasks_dir, caplog):  # noqa: F811
    """The whole matrix (base and another model, seeds 1 and 2, no floor) under ``setting``: (cfg, layout,
    results, the search's state)."""
    extra = (setting, "finetune.seeds=[1, 2]", f"finetune.extra_models={{other: {tiny_bert}}}", "finetune.floor=false")
    cfg = make_cfg(tiny_bert, tasks_dir, *extra)
    layout = RunLayout(tmp_path / "run")
    caplog.set_level("INFO", logger="domainbert")
    results = finetune_all(cfg, layout)
    return cfg, layout, results, recipe.search_state(cfg, layout)


def test_the_rate_best_on_validation_is_every_models_rate(tmp_path, tiny_bert, tasks_dir, caplog):  # noqa: F811
    cfg, layout, results, state = _matrix(GRID, tmp_path, tiny_bert, tasks_dir, caplog)
    assert sorted(state) == ["cls", "ner"] and all(sorted(s) == [1e-5, 3e-3] for s in state.values())
    for task, by_rate in state.items():
        scores = {lr: r["validation"][r["primary_metric"]] for lr, r in by_rate.items()}
        assert all(r["seed"] == 1 and r["model"].startswith("lr-") for r in by_rate.values())
        assert scores[3e-3] > scores[1e-5], (task, scores)  # the grid's two ends differ on these tasks
        # the level a run at chance does not pass on validation (the report's failed-search rule reads it)
        chance = {r["chance_validation"] for r in by_rate.values()}
        assert chance == {0.0} if task == "ner" else len(chance) == 1 and 0 < chance.pop() < 1, (task, chance)
    chosen = recipe.applied(cfg, layout).finetune.lr_chosen
    assert chosen == {"cls": 3e-3, "ner": 3e-3}
    assert {(r["model"], r["seed"]) for r in results} == {(m, s) for m in ("base", "other") for s in (1, 2)} and len(
        results
    ) == 8
    for r in results:  # every model, every seed, at the chosen rate: its record says so
        folder = layout.finetune(r["model"], r["task"], r["seed"])
        assert json.loads((folder / "_domainbert.json").read_text())["config"]["chosen_lr"] == 3e-3
    assert any("recipe ner: lr 0.003 chosen on validation" in m for m in caplog.messages)
    # The search's run at the chosen rate is base's first seed (the same computation), not trained again.
    search = recipe.search_layout(layout)
    for task in ("cls", "ner"):
        first = json.loads((layout.finetune("base", task, 1) / "result.json").read_text())
        source = json.loads((search.finetune("lr-0.003", task, 1) / "result.json").read_text())
        assert first["adopted_from"] == f"recipe/finetune/lr-0.003/{task}/seed-1"
        assert (first["model"], first["test"], first["pred"]) == ("base", source["test"], source["pred"])
        assert (layout.finetuned_model("base", task) / "config.json").is_file()  # a model kept, whichever seed won
    trained = [m for m in caplog.messages if "fine-tuning " in m and " on " in m]
    assert not [m for m in trained if "fine-tuning base (" in m and m.endswith("seed 1")], trained
    assert len(trained) == 2 * 2 + 3 * 2, trained  # per task: the search's 2 rates, then base 2, other 1 and 2
    # The search's runs are out of the comparison's folders.
    assert not any(p.name.startswith("lr-") for p in (layout.root / "finetune").iterdir())

    caplog.clear()
    finetune_all(cfg, layout)  # a rerun: nothing searched or trained again
    assert not any("fine-tuning " in m and " on " in m for m in caplog.messages), caplog.messages


def test_the_choice_prefers_runs_that_did_not_collapse_then_the_lower_rate():
    def run(score: float, collapsed: bool = False) -> dict:
        return {"validation": {"f1": score}, "primary_metric": "f1", "collapse_validation": {"collapsed": collapsed}}

    assert recipe.choose({1e-4: run(0.5), 3e-4: run(0.7)}) == 3e-4
    assert recipe.choose({1e-4: run(0.5), 3e-4: run(0.9, collapsed=True)}) == 1e-4
    assert recipe.choose({1e-4: run(0.6), 3e-4: run(0.6)}) == 1e-4


def test_a_task_with_its_own_rate_is_not_searched_and_no_grid_changes_no_fingerprint(tmp_path, tiny_bert, tasks_dir):  # noqa: F811
    cfg = make_cfg(tiny_bert, tasks_dir, GRID)
    tasks = [t.model_copy(update={"lr": 1e-3}) if t.name == "cls" else t for t in cfg.finetune.tasks]
    own = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"tasks": tasks})})
    assert [t.name for t in recipe.searched_tasks(own)] == ["ner"]
    assert task_lr(own, task_config(own, "cls")) == 1e-3

    from domainbert.finetune.jobs import Job

    plain = make_cfg(tiny_bert, tasks_dir)
    job = Job("base", str(tiny_bert), "ner", 1, "finetune")
    assert run_record(plain, job)[2] == run_record(cfg, job)[2]  # a grid with nothing chosen: the same run


def test_plan_counts_the_search_runs(tmp_path, tiny_bert, tasks_dir, capsys):  # noqa: F811
    args = cfg_overrides(tiny_bert, tasks_dir, GRID)
    assert run_cli(["plan", "science", "--no-estimate", "--out", str(tmp_path / "run"), *args]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("finetune "))
    search = "the learning-rate search first: 4 runs of the base (2 rates x 2 task(s), first seed; the chosen rate's"
    assert search in line and "run is base's first seed), 4 to run" in line, line
    # base's first seed of each task is the search's run: 2 fewer to train than the matrix and the search hold
    total, runs = re.search(r"will run (\d+) of (\d+)", line).groups(), re.search(r"(\d+) runs \+", line).group(1)
    assert int(total[1]) == int(runs) + 4 and int(total[0]) == int(runs) + 4 - 2, line


REFERENCE = "finetune.early_stopping=reference"


def test_every_model_stops_at_the_step_the_reference_kept(tmp_path, tiny_bert, tasks_dir, caplog):  # noqa: F811
    """``early_stopping: reference``: base's first seed stops early on validation (a search of its one rate,
    recipe/), and every other run trains to the step it kept on the same schedule, validated there once."""
    cfg, layout, results, state = _matrix(REFERENCE, tmp_path, tiny_bert, tasks_dir, caplog)
    assert {task: sorted(s) for task, s in state.items()} == {"ner": [3e-3], "cls": [3e-3]}  # its one rate each
    stops = recipe.applied(cfg, layout).finetune.stop_chosen
    assert stops == {task: by_rate[3e-3]["best_step"] for task, by_rate in state.items()}
    assert all(len(by_rate[3e-3]["history"]) > 1 for by_rate in state.values())  # the reference validated per epoch
    assert len(results) == 8
    for r in results:
        folder = layout.finetune(r["model"], r["task"], r["seed"])
        record = json.loads((folder / "_domainbert.json").read_text())["config"]
        assert record["stop_step"] == stops[r["task"]] and "chosen_lr" not in record  # no grid: no rate chosen
        assert r["best_step"] == stops[r["task"]]
        if (r["model"], r["seed"]) != ("base", 1):  # trained to the step, validated once there
            assert r["steps"] == stops[r["task"]] and [h["step"] for h in r["history"]] == [stops[r["task"]]], r
    for task in ("cls", "ner"):  # the reference's own run is base's first seed: the same computation
        first = json.loads((layout.finetune("base", task, 1) / "result.json").read_text())
        assert first["adopted_from"] == f"recipe/finetune/lr-0.003/{task}/seed-1"
    assert any("every model's run stops at step" in m for m in caplog.messages), caplog.messages
    trained = [m for m in caplog.messages if "fine-tuning " in m and " on " in m]
    assert len(trained) == 2 * (1 + 3), trained  # per task: the reference's run, then base 2, other 1 and 2

    caplog.clear()
    finetune_all(cfg, layout)  # a rerun: nothing searched or trained again
    assert not any("fine-tuning " in m and " on " in m for m in caplog.messages), caplog.messages


def test_a_run_stopping_on_the_reference_refuses_to_train_before_its_choice(tiny_bert, tasks_dir):  # noqa: F811
    from domainbert.core.errors import ConfigError
    from domainbert.finetune.stage import settings_for

    cfg = make_cfg(tiny_bert, tasks_dir, REFERENCE)
    task = task_config(cfg, "ner")
    try:
        settings_for(cfg, 1, "finetune", task)
    except ConfigError as err:
        assert "stopping step is not chosen yet" in str(err)
    else:
        raise AssertionError("a run trained with no stopping step chosen")
    assert settings_for(cfg, 1, "frozen", task).stop_step is None  # a frozen run trains its head at its own rate
    chosen = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"stop_chosen": {"ner": 24}})})
    assert settings_for(chosen, 1, "finetune", task).stop_step == 24


def test_plan_counts_the_references_stopping_run(tmp_path, tiny_bert, tasks_dir, capsys):  # noqa: F811
    args = cfg_overrides(tiny_bert, tasks_dir, REFERENCE)
    assert run_cli(["plan", "science", "--no-estimate", "--out", str(tmp_path / "run"), *args]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("finetune "))
    assert "the reference's stopping step first: 2 runs of the base (1 rate x 2 task(s)" in line, line
    assert "its kept step is every run's stop" in line, line
    both = cfg_overrides(tiny_bert, tasks_dir, REFERENCE, GRID)
    assert run_cli(["plan", "science", "--no-estimate", "--out", str(tmp_path / "run"), *both]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("finetune "))
    assert "the learning-rate search and the reference's stopping step first: 4 runs of the base (2 rates" in line


def test_a_search_run_that_kept_its_retry_is_not_adopted_as_base(tmp_path, tiny_bert, tasks_dir, monkeypatch, caplog):  # noqa: F811
    """A search run that collapsed and kept its retry trained at the rate times the retry factor: not the run base's
    first seed makes at the chosen rate, so base's first seed trains on its own."""
    from domainbert.finetune import matrix

    cfg = make_cfg(tiny_bert, tasks_dir, REFERENCE, "finetune.only_tasks=[ner]")
    run = {"validation": {"f1": 0.5}, "primary_metric": "f1", "best_step": 8, "history": [{"step": 8, "epoch": 1.0}]}
    kept = {"ner": {3e-3: {**run, "retry": {"kept": "retry"}}}}
    adopted = []
    monkeypatch.setattr(matrix, "finetune_one", lambda *a, **k: None)
    monkeypatch.setattr(matrix.recipe, "search_state", lambda *a, **k: kept)
    monkeypatch.setattr(matrix, "adopt", lambda *a, **k: adopted.append(a))
    caplog.set_level("INFO", logger="domainbert")
    chosen = matrix.search_recipe(cfg, RunLayout(tmp_path / "run"))
    assert chosen.finetune.stop_chosen == {"ner": 8} and not adopted
    assert any("kept its retry; base's first seed trains on its own" in m for m in caplog.messages)
    first = {"ner": {3e-3: {**run, "retry": {"kept": "first"}}}}
    monkeypatch.setattr(matrix.recipe, "search_state", lambda *a, **k: first)
    matrix.search_recipe(cfg, RunLayout(tmp_path / "run"))
    assert len(adopted) == 1
