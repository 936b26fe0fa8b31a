"""``finetune.save_models``: the saved model loads with transformers' Auto classes and gives the run's
predictions, its card parses, and the folder is current only with its model, written atomically."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from domainbert.core.paths import RunLayout
from domainbert.finetune.export import MODEL
from domainbert.finetune.jobs import Job
from domainbert.finetune.stage import expected_results, finetune_one
from domainbert.plan.stage_state import finetune_state
from domainbert.task_data.splits import load_task
from support.finetune import make_cfg, predict_labels

HUB_ID = "google/bert_uncased_L-2_H-128_A-2"  # what the card names as the base (never fetched)


@pytest.fixture
def modules_cache(tmp_path, monkeypatch) -> Path:
    """Where transformers copies a folder's own model code (trust_remote_code): under tmp_path."""
    import transformers.dynamic_module_utils as dmu

    folder = tmp_path / "hf-modules"
    monkeypatch.setattr(dmu, "HF_MODULES_CACHE", str(folder))
    monkeypatch.setattr(sys, "path", list(sys.path))  # it adds the cache to sys.path
    return folder


@pytest.mark.parametrize(("task_name", "pooling"), [("ner", "mean"), ("cls", "mean"), ("cls", "cls")])
def test_saved_model_loads_and_predicts_the_runs_labels(tmp_path, tiny_bert, tasks_dir, modules_cache,  # noqa: F811
                                                        task_name, pooling):
    from huggingface_hub import ModelCard

    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=2", "finetune.save_models=true",
                   f"finetune.pooling={pooling}", f"base_model.hub_id={HUB_ID}")
    layout = RunLayout(tmp_path / "run")
    result = finetune_one(cfg, layout, "base", str(tiny_bert), task_name, 1)
    folder = layout.finetune("base", task_name, 1) / MODEL
    task = next(t for t in cfg.finetune.tasks if t.name == task_name)
    custom = task.type == "classification" and pooling == "mean"
    assert (folder / "modeling_mean_pool.py").is_file() is custom
    examples = load_task(task).splits["test"][:6]
    assert predict_labels(folder, task, examples, custom) == result["pred"][:6]
    if custom:  # no [CLS]-pooler head quietly built on these weights
        from transformers import AutoModelForSequenceClassification

        with pytest.raises(ValueError, match="trust_remote_code"):
            AutoModelForSequenceClassification.from_pretrained(folder)
    card = ModelCard.load(folder / "README.md")
    assert card.data.base_model == HUB_ID and card.data.pipeline_tag == (
        "token-classification" if task.type == "ner" else "text-classification")
    scores = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert scores[result["primary_metric"]] == round(100 * result["test"][result["primary_metric"]], 2)
    assert all(r.dataset_split == "test" and r.dataset_name == task_name for r in card.data.eval_results)
    texts = [p.read_text(errors="replace") for p in folder.iterdir() if p.suffix in (".json", ".md", ".txt", ".py")]
    assert not [t for t in texts if str(tmp_path) in t or str(tiny_bert) in t]  # no local path anywhere


def _files(layout: RunLayout) -> list[str]:
    return sorted(p.relative_to(layout.root).as_posix() for p in (layout.root / "finetune").rglob("*")
                  if "/model/" not in p.relative_to(layout.root).as_posix())


def test_save_models_reruns_runs_without_a_model_and_writes_it_atomically(tmp_path, tiny_bert, tasks_dir,  # noqa: F811
                                                                          monkeypatch):
    off = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=1")
    on = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=1", "finetune.save_models=true")
    layout = RunLayout(tmp_path / "run")
    run = layout.finetune("base", "cls", 1)
    job = Job("base", str(tiny_bert), "cls", 1, "finetune")
    first = finetune_one(off, layout, "base", str(tiny_bert), "cls", 1)
    assert not (run / MODEL).exists()
    # The result is still usable (the report keeps it), but the run is not done for a config that wants the model.
    assert {(e["model"], e["state"]) for e in expected_results(on, layout) if e["task"] == "cls"} >= {("base", "no model")}
    assert finetune_state(off, layout, job).current and not finetune_state(on, layout, job).current
    second = finetune_one(on, layout, "base", str(tiny_bert), "cls", 1)
    assert (run / MODEL / "config.json").is_file() and (run / MODEL / "README.md").is_file()
    assert second["pred"] == first["pred"] and finetune_state(on, layout, job).current  # same fingerprint
    recorded = json.loads((run / "_domainbert.json").read_text())["files"]
    assert "model/model.safetensors" in recorded and "model/README.md" in recorded
    mtime = (run / "result.json").stat().st_mtime_ns
    finetune_one(on, layout, "base", str(tiny_bert), "cls", 1)  # up to date: skipped
    finetune_one(off, layout, "base", str(tiny_bert), "cls", 1)  # turning it off keeps what is there
    assert (run / "result.json").stat().st_mtime_ns == mtime and (run / MODEL).is_dir()

    # A model folder deleted by hand is missed; a rerun that fails while writing leaves no model in place.
    import shutil

    shutil.rmtree(run / MODEL)
    assert not finetune_state(on, layout, job).current
    before = _files(layout)

    def broken_card(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("domainbert.cards.finetuned_and_corpus.finetuned_card", broken_card)
    with pytest.raises(RuntimeError, match="disk full"):
        finetune_one(on, layout, "base", str(tiny_bert), "cls", 1)
    assert _files(layout) == before  # no model, no temporary or staging folder left beside the run
    assert not (run / MODEL).exists() and not finetune_state(on, layout, job).current


def test_card_of_an_arm_and_a_hub_task_names_no_local_path(tmp_path, tiny_bert, tasks_dir):  # noqa: F811
    from huggingface_hub import ModelCard

    from domainbert.cards.finetuned_and_corpus import finetuned_card
    from domainbert.config.finetune import TaskConfig

    cfg = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[continued]")
    hub_task = TaskConfig(name="hubner", type="ner", format="hf", path="org/ner-set", labels=["O", "B-X", "I-X"])
    cfg = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"tasks": [hub_task]})})
    result = {"model": "continued-frozen", "model_ref": str(tmp_path / "run" / "pretrain" / "continued" / "model"),
              "mode": "frozen", "task": "hubner", "task_type": "ner", "seed": 2, "lr": 0.001, "steps": 40,
              "best_step": 30, "collapsed": False, "collapse": {"reasons": []},
              "validation": {"f1": 0.5, "precision": 0.5, "recall": 0.5, "per_type": {}},
              "test": {"f1": 0.4, "precision": 0.5, "recall": 0.3333, "per_type": {"X": {"f1": 0.4}}}}
    text = finetuned_card(cfg, result, ["O", "B-X", "I-X"])
    card = ModelCard(text)
    assert card.data.base_model is None  # an arm has no Hub id until it is pushed
    assert card.data.datasets == ["org/ner-set"]
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {"f1": 40.0, "precision": 50.0,
                                                                              "recall": 33.33}
    assert "`continued` arm" in text and "encoder frozen" in text and str(tmp_path) not in text
    assert str(tiny_bert) not in text and "trust_remote_code" not in text
