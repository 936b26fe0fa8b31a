"""Pretraining metrics in MLflow (a local SQLite store), W&B (offline run files) and TensorBoard, and
periodic evaluation (``pretrain.eval_every``)."""

from __future__ import annotations

import json

import pytest

from domainbert.core.artifacts import read_record
from domainbert.core.paths import RunLayout
from domainbert.pretrain.stage import arm_fingerprint, pretrain_arm
from support.pretrain import make_cfg, write_corpus
from support.tracking_records import tensorboard_scalars, wandb_history


def _records(layout: RunLayout, kind: str) -> list[dict]:
    lines = (layout.pretrain("continued") / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_pretraining_reports_to_mlflow_wandb_and_tensorboard(base_model, layout, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # where MLflow would put ./mlruns
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = make_cfg(base_model, "tracking.report_to=[tensorboard, mlflow, wandb]",
                   f"tracking.mlflow_tracking_uri={uri}", "pretrain.eval_every=4")
    pretrain_arm(cfg, "continued", layout)  # 8 steps, a record every 2

    train = _records(layout, "train")
    assert [r["step"] for r in train] == [2, 4, 6, 8]
    assert [r["step"] for r in _records(layout, "eval")] == [0, 4, 8]

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("domainbert-science").experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.run_name == "pretrain/continued" and run.info.status == "FINISHED"
    assert run.data.tags["domainbert.arm"] == "continued"
    assert run.data.tags["domainbert.fingerprint"] == read_record(layout.pretrained_model("continued"))["fingerprint"]
    assert run.data.params["pretrain.seq_len"] == "32" and run.data.params["arm"] == "continued"
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert history == [(r["step"], pytest.approx(r["loss"])) for r in train]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/domain_perplexity")] == [0, 4, 8]
    # The user's SQLite store keeps the arm's artifacts beside it, not in ./mlruns of the working directory.
    assert {p.name for p in (tmp_path / "mlartifacts").rglob("*") if p.is_file()} >= {"summary.json", "README.md"}
    assert not (tmp_path / "elsewhere" / "mlruns").exists()

    wandb = wandb_history(layout.pretrain("continued"))
    assert [(step, row["train/loss"]) for step, row in wandb if "train/loss" in row] == \
        [(r["step"], pytest.approx(r["loss"])) for r in train]
    assert [step for step, row in wandb if "eval/domain_perplexity" in row] == [0, 4, 8]

    scalars = tensorboard_scalars(layout.pretrain("continued") / "tensorboard")
    assert [step for step, _ in scalars["train/loss"]] == [2, 4, 6, 8]


def test_periodic_evaluation_leaves_the_recipe_and_the_training_unchanged(base_model, tmp_path, texts):
    runs = {}
    settings = {"none": ["pretrain.watch_points=0"], "every-2": ["pretrain.eval_every=2", "pretrain.watch_points=0"],
                "watch": ["pretrain.watch_share=1.0"]}  # the curve: 5 points on the first rows of each set
    for name, overrides in settings.items():
        layout = RunLayout(tmp_path / name)
        write_corpus(layout.corpus, texts)
        cfg = make_cfg(base_model, *overrides)
        runs[name] = (pretrain_arm(cfg, "continued", layout), arm_fingerprint(cfg, "continued", layout), layout)
    for name in ("every-2", "watch"):
        assert runs[name][1] == runs["none"][1]
        assert runs[name][0]["loss_curve"] == runs["none"][0]["loss_curve"]
        assert runs[name][0]["domain_perplexity"] == runs["none"][0]["domain_perplexity"]
    assert [r["step"] for r in _records(runs["every-2"][2], "eval")] == [0, 2, 4, 6, 8]
    assert [r["step"] for r in _records(runs["none"][2], "eval")] == [0, 8]
    assert not _records(runs["none"][2], "watch")
    watch = _records(runs["watch"][2], "watch")
    assert [r["step"] for r in watch] == [0, 2, 4, 6, 8] and all(r["domain_perplexity"] > 1 for r in watch)
    # The curve's sets are the first rows of the whole sets: at the same weights they differ, being subsets.
    assert watch[0]["domain_perplexity"] != _records(runs["watch"][2], "eval")[0]["domain_perplexity"]


def test_watch_sets_keep_the_curve_under_its_share_of_training_compute():
    import torch

    from domainbert.pretrain.data import Batch
    from domainbert.pretrain.evaluation import watch_sets, watch_steps

    ids = torch.zeros((200, 128), dtype=torch.long)
    full = Batch(ids, ids.bool(), ids.bool(), None, ids.numel())
    sets = {"domain": full, "general": full}
    # 86,016 training tokens (the demo's arm): 0.1 x 3 x 86,016 / (5 points x 2 sets x 128) = 20 rows per set
    watched = watch_sets(sets, 5, 0.1, 86_016)
    assert {name: b.input_ids.shape[0] for name, b in watched.items()} == {"domain": 20, "general": 20}
    assert 5 * 2 * 20 * 128 <= 0.1 * 3 * 86_016
    assert watch_sets(sets, 5, 0.1, 10_000) is None  # 2 rows: too few to draw a curve
    assert watch_sets(sets, 5, 0.1, 10**9)["domain"].input_ids.shape[0] == 200  # never more than the set
    assert watch_steps(5, 21) == {5, 10, 16} and watch_steps(5, 3) == {1, 2}


def test_an_unusable_tracking_store_stops_the_run_naming_the_setting(base_model, layout):
    from domainbert.core.errors import DomainbertError

    cfg = make_cfg(base_model, "tracking.report_to=[mlflow]", "tracking.mlflow_tracking_uri=nosuch://store")
    with pytest.raises(DomainbertError, match="cannot start mlflow tracking") as err:
        pretrain_arm(cfg, "continued", layout)
    assert err.value.field == "tracking.report_to"
    assert not layout.pretrained_model("continued").exists()


def test_throughput_of_a_window_leaves_out_evaluation_and_checkpointing_but_keeps_its_tokens(monkeypatch):
    from domainbert.pretrain import trainer

    clock = iter([112.0, 113.0, 120.0, 120.0])  # each value one reading, in order
    monkeypatch.setattr(trainer.time, "perf_counter", lambda: next(clock))
    window = trainer.LogWindow(start=100.0)
    window.tokens += 400
    window.pause_since(110.0)  # a checkpoint saved from 110 to 112
    window.tokens += 100
    window.pause_since(112.0)  # an evaluation from 112 to 113
    # closed at 120: 500 tokens over 20 s of which 3 s were not training
    assert window.close() == pytest.approx(500 / 17)
    assert (window.tokens, window.paused, window.start) == (0, 0.0, 120.0)


def test_the_default_mlflow_store_keeps_its_artifacts_in_the_run_and_tensorboard_gets_hparams(
        base_model, layout, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)  # MLflow's own default would put ./mlruns here
    pretrain_arm(make_cfg(base_model, "tracking.report_to=[tensorboard, mlflow]"), "continued", layout)

    client = MlflowClient(tracking_uri=f"sqlite:///{layout.root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("domainbert-science")
    assert experiment.artifact_location == (layout.root / "mlartifacts").resolve().as_uri()
    [run] = client.search_runs([experiment.experiment_id])
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"summary.json", "README.md", "loss_curve.png"}
    assert not (tmp_path / "mlruns").exists()
    assert not [p for p in layout.root.rglob("*") if p.name.endswith(".lock")]  # no lock file left behind
    hparams = layout.pretrain("continued") / "tensorboard" / "hparams"
    assert any(p.name.startswith("events.out.tfevents") for p in hparams.iterdir())
