"""The fine-tuning stage end to end on a tiny random BERT: result.json, skipping, determinism, modes, errors."""

from __future__ import annotations

import gzip
import json
import math
import re
import shutil

import numpy as np
import pytest

from domainbert.core.errors import ModelError
from domainbert.core.paths import RunLayout
from domainbert.finetune.jobs import models_to_compare, task_config
from domainbert.finetune.matrix import finetune_all
from domainbert.finetune.stage import finetune_one, settings_for
from domainbert.finetune.trainer import length_grouped_batches
from domainbert.report.stats import compare_models
from support.finetune import make_cfg


def test_finetune_one_writes_result_learns_and_skips(tmp_path, tiny_bert, tasks_dir, caplog):
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=6")
    layout = RunLayout(tmp_path / "run")
    caplog.set_level("INFO", logger="domainbert")
    res = finetune_one(cfg, layout, "base", str(tiny_bert), "ner", 1)
    # Every line of the run says which run it is (parallel workers' lines interleave).
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("domainbert.finetune")]
    assert lines and all(line.startswith("[base/ner/seed-1] ") for line in lines), lines
    assert any(re.match(r"\[base/ner/seed-1\] step \d+/\d+ loss .* examples/s, ETA \d+s\)", line) for line in lines)
    path = layout.finetune("base", "ner", 1) / "result.json"
    assert json.loads(path.read_text())["test"] == res["test"]
    assert (res["model"], res["task"], res["task_type"], res["seed"], res["primary_metric"]) == ("base", "ner", "ner", 1, "f1")
    assert set(res["test"]) == {"f1", "precision", "recall", "macro_f1", "per_type"}
    assert len(res["gold"]) == len(res["pred"]) == 16
    assert [len(g) for g in res["gold"]] == [len(p) for p in res["pred"]]
    assert res["test"]["f1"] > 0.8  # a word-identity rule; misaligned labels would not learn it
    assert res["examples_per_s"] > 0 and res["train_examples"] == res["steps"] * 8
    # what the window left unread, per split, as the report reads it (the tiny sentences all fit)
    assert res["cut_by_window"] == {"max_length": cfg.finetune.max_length, "chunks": 1, "train": 0, "validation": 0,
                                    "test": 0}
    mtime = path.stat().st_mtime_ns
    again = finetune_one(cfg, layout, "base", str(tiny_bert), "ner", 1)
    assert again["pred"] == res["pred"] and path.stat().st_mtime_ns == mtime  # skipped: up to date


def test_same_seed_same_data_order_across_model_names(tmp_path, tiny_bert, tasks_dir):
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=1")
    layout = RunLayout(tmp_path / "run")
    a = finetune_one(cfg, layout, "a", str(tiny_bert), "cls", 1)
    b = finetune_one(cfg, layout, "b", str(tiny_bert), "cls", 1)
    assert a["pred"] == b["pred"] and a["history"] == b["history"]
    assert set(a["test"]) == {"macro_f1", "accuracy"} and a["gold"][:2] == ["tech", "plain"]


@pytest.mark.parametrize(("pooling", "head"), [
    ("mean", 128 * 2 + 2),  # the classifier layer: hidden x labels + bias
    ("cls", 128 * 128 + 128 + 128 * 2 + 2),  # and the pooler, initialised anew for the run: part of the head
])
def test_frozen_mode_trains_only_the_head(tmp_path, tiny_bert, tasks_dir, pooling, head):
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.mode=frozen", "finetune.epochs=1", f"finetune.pooling={pooling}")
    layout = RunLayout(tmp_path / "run")
    res = finetune_one(cfg, layout, "base-frozen", str(tiny_bert), "cls", 1)
    assert res["mode"] == "frozen"
    assert res["trainable_parameters"] == head


def test_models_to_compare_and_finetune_all(tmp_path, tiny_bert, tasks_dir):
    layout = RunLayout(tmp_path / "run")
    shutil.copytree(tiny_bert, layout.pretrained_model("continued"))
    cfg = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[continued, scratch]", "finetune.seeds=[1, 2]",
                   "finetune.epochs=1", "finetune.tasks=" + json.dumps([
                       {"name": "cls", "type": "classification", "format": "jsonl", "path": str(tasks_dir / "cls"),
                        "labels": ["tech", "plain"]}]))
    models = models_to_compare(cfg, layout)
    assert models == {"base": str(tiny_bert), "continued": str(layout.pretrained_model("continued"))}
    results = finetune_all(cfg, layout)
    assert [(r["model"], r["seed"]) for r in results] == [("floor", 0), ("base", 1), ("base", 2), ("continued", 1),
                                                          ("continued", 2)]
    floor = results[0]
    # The floor saw exactly the models' examples and is scored on the same test answers; one word decides the
    # label in this task, so a bag of words learns it.
    assert floor["gold"] == results[1]["gold"] and floor["test"]["macro_f1"] == 1.0 and not floor["collapsed"]
    assert json.loads((layout.finetune("floor", "cls", 0) / "result.json").read_text())["mode"] == "floor"
    results = results[1:]
    cmp = compare_models(results[2:], results[:2], n_samples=100)
    # the same weights, seeds and data order: identical predictions, a zero difference
    assert (cmp.diff, cmp.verdict) == (0.0, "no significant difference")
    assert cmp.low <= 0.0 <= cmp.high


def test_only_models_runs_and_expects_only_the_named_models(tmp_path, tiny_bert, tasks_dir):
    from domainbert.finetune.expectations import expected_runs

    layout = RunLayout(tmp_path / "run")
    shutil.copytree(tiny_bert, layout.pretrained_model("continued"))
    tasks = "finetune.tasks=" + json.dumps([{"name": "cls", "type": "classification", "format": "jsonl",
                                             "path": str(tasks_dir / "cls"), "labels": ["tech", "plain"]}])
    every = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[continued]", "finetune.seeds=[1]", tasks)
    only = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[continued]", "finetune.seeds=[1]", tasks,
                    "finetune.only_models=[continued]")
    assert list(models_to_compare(only, layout)) == ["continued"]
    assert [(r.model, r.seed) for r in expected_runs(only, layout)] == [("floor", 0), ("continued", 1)]
    # which models run is not part of a result's identity: the continued run is the same either way
    both = {r.model: r.fingerprint for r in expected_runs(every, layout)}
    assert {r.model: r.fingerprint for r in expected_runs(only, layout)} == {k: both[k] for k in ("floor", "continued")}


def test_only_models_naming_a_model_the_run_lacks_is_refused_before_any_run(tmp_path, tiny_bert, tasks_dir):
    from domainbert.core.errors import ConfigError

    layout = RunLayout(tmp_path / "run")
    # no warm-up in this run: the checkpoint is `base`, so there is no `original` to fine-tune
    original = make_cfg(tiny_bert, tasks_dir, "finetune.only_models=[original]")
    with pytest.raises(ConfigError, match="original is the checkpoint before a base warm-up") as err:
        models_to_compare(original, layout)
    assert err.value.field == "finetune.only_models" and "it has base" in str(err.value)
    unpretrained = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[continued]", "finetune.only_models=[continued]")
    with pytest.raises(ConfigError, match="continued is an arm with no pretrained model at .*continued"):
        finetune_all(unpretrained, layout)
    assert not (layout.root / "finetune").exists()  # not even the floor ran


def test_run_refuses_original_before_any_stage_only_where_no_warm_up_will_make_one(tmp_path, tiny_bert, tasks_dir):
    from domainbert.core.errors import ConfigError
    from domainbert.finetune.jobs import require_planned_original

    layout = RunLayout(tmp_path / "run")
    scratch_only = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[scratch]", "finetune.only_models=[original, scratch]")
    with pytest.raises(ConfigError, match=r"original is the checkpoint before a base warm-up.*\); it has base, scratch"):
        require_planned_original(scratch_only, layout)  # scratch, not pretrained yet, is not held against it
    warmed = make_cfg(tiny_bert, tasks_dir, "pretrain.arms=[continued]", "finetune.only_models=[original]")
    require_planned_original(warmed, layout)  # the warm-up before continued makes `original` a model of the run
    assert not layout.root.exists()


def test_model_folder_without_tokenizer_is_a_model_error(tmp_path, tiny_bert, tasks_dir):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert / name, bare / name)
    cfg = make_cfg(tiny_bert, tasks_dir)
    with pytest.raises(ModelError, match="no tokenizer"):
        finetune_one(cfg, RunLayout(tmp_path / "run"), "bare", str(bare), "cls", 1)
    assert not RunLayout(tmp_path / "run").finetune("bare", "cls", 1).exists()


def test_length_grouped_batches_are_a_seeded_permutation():
    lengths = [5, 1, 9, 3, 7, 2, 8, 4, 6, 10]
    a = length_grouped_batches(lengths, 2, 2, np.random.default_rng(4))
    assert a == length_grouped_batches(lengths, 2, 2, np.random.default_rng(4))
    assert sorted(i for b in a for i in b) == list(range(10))
    for batch in a:
        assert lengths[batch[0]] >= lengths[batch[-1]]


def test_a_task_can_set_its_own_lr_and_epochs(tiny_bert, tasks_dir):
    tasks = [{"name": "ner", "type": "ner", "format": "conll", "path": str(tasks_dir / "ner"),
              "labels": ["O", "B-TERM", "I-TERM"], "lr": 3e-4, "epochs": 5},
             {"name": "cls", "type": "classification", "format": "jsonl", "path": str(tasks_dir / "cls"),
              "labels": ["tech", "plain"]}]
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.tasks=" + json.dumps(tasks), "finetune.lr=1e-4")
    ner, cls = (settings_for(cfg, 1, "finetune", task_config(cfg, name)) for name in ("ner", "cls"))
    assert (ner.lr, ner.epochs) == (3e-4, 5) and (cls.lr, cls.epochs) == (1e-4, 4)
    assert settings_for(cfg, 1, "frozen", task_config(cfg, "ner")).lr == cfg.finetune.frozen_lr


def test_report_uses_only_current_results_and_lists_the_rest(tmp_path, tiny_bert, tasks_dir):
    from domainbert.finetune.expectations import write_expected
    from domainbert.finetune.stage import expected_results
    from domainbert.report.compare import render_report

    one_task = "finetune.tasks=" + json.dumps([{"name": "cls", "type": "classification", "format": "jsonl",
                                                "path": str(tasks_dir / "cls"), "labels": ["tech", "plain"]}])
    cfg = make_cfg(tiny_bert, tasks_dir, one_task, "pretrain.arms=[continued]", "finetune.seeds=[1, 2]",
                   "finetune.epochs=1")
    layout = RunLayout(tmp_path / "run")
    finetune_all(cfg, layout)  # floor and base; the continued arm was never trained
    states = {(e["model"], e["seed"]): e["state"] for e in expected_results(cfg, layout)}
    assert states == {("floor", 0): "current", ("base", 1): "current", ("base", 2): "current",
                      ("continued", 1): "missing", ("continued", 2): "missing"}
    render_report(cfg, layout)
    md = (layout.report / "report.md").read_text()
    assert "Results: 3 of the 5 this config asks for; missing: continued/cls/seed-1, continued/cls/seed-2." in md
    # Another learning rate makes the stored model runs stale: they leave the tables, the floor stays.
    changed = make_cfg(tiny_bert, tasks_dir, one_task, "pretrain.arms=[continued]", "finetune.seeds=[1, 2]",
                       "finetune.epochs=1", "finetune.lr=0.001")
    assert {e["state"] for e in expected_results(changed, layout) if e["model"] == "base"} == {"stale"}
    # The report judges by what the run expects (finetune/expected.json), not by the config it is rendered
    # with: until fine-tuning starts under the new config, the stored runs are the run's current ones.
    render_report(changed, layout)
    assert "| base |" in (layout.report / "report.md").read_text().split("## Headline")[1].split("## This run")[0]
    write_expected(changed, layout)  # what fine-tuning under the new config writes before it runs anything
    md = render_report(changed, layout).with_name("report.md").read_text()  # fewer results: beside report/
    assert "left out as stale (made with another config or input): base/cls/seed-1, base/cls/seed-2" in md
    assert "| base |" not in md.split("## Headline")[1].split("## This run")[0]


def test_bf16_autocast_trains_and_device_is_a_speed_setting(tmp_path, tiny_bert, tasks_dir):
    from domainbert.finetune.jobs import Job, run_record

    fp32 = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=1", "finetune.precision=fp32")
    bf16 = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=1", "finetune.precision=bf16")
    layout = RunLayout(tmp_path / "run")
    a = finetune_one(fp32, layout, "fp32", str(tiny_bert), "ner", 1)
    b = finetune_one(bf16, layout, "bf16", str(tiny_bert), "ner", 1)
    assert b["history"] and all(math.isfinite(h["loss"]) for h in b["history"])
    assert a["history"][0]["loss"] != b["history"][0]["loss"]  # autocast really ran in bf16
    assert abs(a["history"][0]["loss"] - b["history"][0]["loss"]) < 0.05 * a["history"][0]["loss"]
    job = Job("base", str(tiny_bert), "ner", 1, "finetune")
    on_cpu = make_cfg(tiny_bert, tasks_dir, "finetune.device=cpu")
    assert run_record(on_cpu, job)[2] == run_record(make_cfg(tiny_bert, tasks_dir), job)[2]  # device: speed only
    assert run_record(bf16, job)[2] != run_record(fp32, job)[2]  # precision changes the numbers
    # min_steps: left out of the record at 0 (runs stored before it existed stay current), in it when set
    assert "min_steps" not in run_record(fp32, job)[0]["finetune"]
    longer = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=1", "finetune.precision=fp32", "finetune.min_steps=50")
    assert run_record(longer, job)[0]["finetune"]["min_steps"] == 50
    assert run_record(longer, job)[2] != run_record(fp32, job)[2]
    assert settings_for(longer, 1, "finetune", task_config(longer, "ner")).min_steps == 50


def test_a_gpu_that_is_not_there_or_fp16_on_cpu_is_one_clear_error(tmp_path, tiny_bert, tasks_dir):
    import torch

    from domainbert.core.distributed import resolve_device
    from domainbert.core.errors import ModelError

    assert resolve_device("auto", "auto") == ((torch.device("cuda"), torch.bfloat16) if torch.cuda.is_available()
                                              and torch.cuda.is_bf16_supported() else (torch.device("cpu"), None))
    if not torch.cuda.is_available():
        cfg = make_cfg(tiny_bert, tasks_dir, "finetune.device=cuda", "finetune.epochs=1")
        with pytest.raises(ModelError, match="no CUDA device"):
            finetune_one(cfg, RunLayout(tmp_path / "run"), "base", str(tiny_bert), "ner", 1)
        with pytest.raises(ModelError, match="fp16 needs a CUDA device"):
            resolve_device("cpu", "fp16")


def test_a_run_sends_its_curve_and_test_scores_to_mlflow_and_tensorboard(tmp_path, tiny_bert, tasks_dir):
    from mlflow import MlflowClient

    from support.tracking_records import tensorboard_scalars

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = make_cfg(tiny_bert, tasks_dir, "tracking.report_to=[tensorboard, mlflow]",
                   f"tracking.mlflow_tracking_uri={uri}", "finetune.evals_per_epoch=2")
    layout = RunLayout(tmp_path / "run")
    res = finetune_one(cfg, layout, "base", str(tiny_bert), "cls", 1)
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("domainbert-science").experiment_id])
    assert run.info.run_name == "finetune/base/cls/seed-1" and run.info.status == "FINISHED"
    assert run.data.tags["domainbert.task"] == "cls" and run.data.tags["domainbert.mode"] == "finetune"
    assert run.data.params["settings.lr"] == "0.003" and run.data.params["seed"] == "1"
    curve = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "validation/macro_f1"))
    assert len(curve) == len(res["history"]) > 2
    assert curve == [(e["step"], pytest.approx(e["validation"]["macro_f1"])) for e in res["history"]]
    (test,) = client.get_metric_history(run.info.run_id, "test/macro_f1")
    assert (test.step, test.value) == (res["steps"], pytest.approx(res["test"]["macro_f1"]))
    events = tensorboard_scalars(layout.root / "tracking" / "finetune" / "base" / "cls" / "seed-1" / "tensorboard")
    assert [step for step, _ in events["train/loss"]] == [e["step"] for e in res["history"]]
    assert sorted(p.name for p in layout.finetune("base", "cls", 1).iterdir()) == ["_domainbert.json", "result.json"]


def test_a_test_split_copied_from_train_is_reported_and_left_out_of_scoring(tmp_path, tiny_bert, tasks_dir):
    """Ten test examples are verbatim copies of training examples: fine-tuning and the floor score the other six,
    and every result says what was found; with ``finetune.split_overlap: keep`` all sixteen are scored."""
    folder = tmp_path / "copied"
    folder.mkdir()
    train = gzip.open(tasks_dir / "cls" / "train.jsonl.gz", "rt").read().splitlines()
    test = gzip.open(tasks_dir / "cls" / "test.jsonl.gz", "rt").read().splitlines()
    for split, lines in (("train", train), ("validation", test), ("test", train[:10] + test[10:])):
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    task = {"name": "cls", "type": "classification", "format": "jsonl", "path": str(folder), "labels": ["tech", "plain"]}
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.tasks=" + json.dumps([task]), "finetune.epochs=1")
    layout = RunLayout(tmp_path / "run")
    model = finetune_one(cfg, layout, "base", str(tiny_bert), "cls", 1)
    floor = finetune_one(cfg, layout, "floor", "floor", "cls", 0, mode="floor")
    for res in (model, floor):
        assert res["split_overlap"]["test"]["exact"] >= 10 and res["split_overlap"]["excluded"]
        assert res["num_examples"]["test"] == 16 - res["split_overlap"]["test"]["normalised"]
        assert len(res["gold"]) == res["num_examples"]["test"]
    keep = make_cfg(tiny_bert, tasks_dir, "finetune.tasks=" + json.dumps([task]), "finetune.epochs=1",
                    "finetune.split_overlap=keep")
    kept = finetune_one(keep, RunLayout(tmp_path / "run2"), "base", str(tiny_bert), "cls", 1)
    assert kept["num_examples"]["test"] == 16 and not kept["split_overlap"]["excluded"]
