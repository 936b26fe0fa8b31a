"""The tracker against a real MLflow store (SQLite under tmp_path): runs continued or started anew, a
backend lost mid-run, parameters flattened as MLflow shows them."""

from __future__ import annotations

import logging

import pytest

from domainbert.config.tracking import TrackingConfig
from domainbert.core.errors import DomainbertError
from domainbert.trackers import MetricsLog, Tracker, flat_params


def _tracker(tmp_path, fingerprint: str, resume_step: int | None = None) -> Tracker:
    cfg = TrackingConfig(report_to=["mlflow"], mlflow_tracking_uri=f"sqlite:///{tmp_path}/m.db")
    return Tracker(cfg, folder=tmp_path / "arm", store_root=tmp_path, domain="law", run_name="pretrain/scratch",
                   fingerprint=fingerprint, params={"pretrain": {"lr": 5e-4, "phases": [128, 512]}},
                   tags={"domainbert.arm": "scratch"}, resume_step=resume_step)


def _runs(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/m.db")
    experiment = client.get_experiment_by_name("domainbert-law")
    return client, client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])


def test_flat_params_name_nested_settings_with_dots_and_keep_lists_as_json():
    assert flat_params({"pretrain": {"lr": 5e-4, "deepspeed": {"stage": 2}}, "arms": ["continued"], "x": {}}) == {
        "pretrain.lr": "0.0005", "pretrain.deepspeed.stage": "2", "arms": '["continued"]', "x": "{}"}


def test_a_rerun_continues_its_run_and_a_changed_recipe_starts_another(tmp_path):
    first = _tracker(tmp_path, "fp-1")
    for step in (1, 2, 3):
        first.log(step, {"train/loss": 4.0 - step, "train/note": "text is dropped", "train/mfu": None})
    # killed here: no close. The rerun resumes from the checkpoint of step 1 and replays steps 2 and 3.
    second = _tracker(tmp_path, "fp-1", resume_step=1)
    for step in (2, 3, 4):
        second.log(step, {"train/loss": 4.0 - step})
    second.close()
    client, runs = _runs(tmp_path)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.params == {"pretrain.lr": "0.0005", "pretrain.phases": "[128, 512]"}
    history = client.get_metric_history(runs[0].info.run_id, "train/loss")
    assert sorted((m.step, m.value) for m in history) == [(1, 3.0), (2, 2.0), (3, 1.0), (4, 0.0)]
    assert not client.get_metric_history(runs[0].info.run_id, "train/note")

    third = _tracker(tmp_path, "fp-2")  # another config: another run, from step 1 again
    third.log(1, {"train/loss": 9.0})
    third.close()
    client, runs = _runs(tmp_path)
    assert len(runs) == 2
    assert [m.value for m in client.get_metric_history(runs[1].info.run_id, "train/loss")] == [9.0]


def test_a_backend_lost_mid_run_is_switched_off_and_the_metrics_file_goes_on(tmp_path, caplog):
    cfg = TrackingConfig(report_to=["mlflow"], mlflow_tracking_uri=f"sqlite:///{tmp_path}/m.db")
    metrics = MetricsLog(tmp_path / "arm", True, None,
                         lambda: Tracker(cfg, folder=tmp_path / "arm", store_root=tmp_path, domain="law",
                                         run_name="r", fingerprint="fp", params={}, tags={}, resume_step=None))
    metrics.write({"kind": "train", "step": 1, "loss": 2.0})
    client, (run,) = _runs(tmp_path)
    client.delete_run(run.info.run_id)  # the store now refuses every write to this run
    with caplog.at_level(logging.WARNING, logger="domainbert.trackers"):
        metrics.write({"kind": "train", "step": 2, "loss": 1.5})
        metrics.write({"kind": "train", "step": 3, "loss": 1.0})
    warnings = [r.getMessage() for r in caplog.records if r.name == "domainbert.trackers"]
    assert len(warnings) == 1 and warnings[0].startswith("mlflow tracking failed at step 2")
    metrics.close()
    assert [line.count('"step"') for line in (tmp_path / "arm" / "metrics.jsonl").read_text().splitlines()] == [1] * 3


def test_a_missing_backend_package_names_the_extra(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    cfg = TrackingConfig(report_to=["wandb"])
    with pytest.raises(DomainbertError, match=r"pip install 'domainbert\[tracking\]'"):
        Tracker(cfg, folder=tmp_path, store_root=tmp_path, domain="law", run_name="r", fingerprint="fp",
                params={}, tags={}, resume_step=None)
