"""Exact resume: a run killed with SIGKILL and restarted ends with the same weights as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from domainbert.config.domain import save_run_config
from domainbert.core.paths import RunLayout
from domainbert.pretrain import checkpoint as ckpt
from domainbert.pretrain.launch import worker_args
from domainbert.pretrain.replay_text import ensure_replay_text
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import PRECISIONS, exact_cfg, write_corpus
from support.tracking_records import tensorboard_scalars


def _worker(cfg, layout: RunLayout, throttle: float) -> subprocess.Popen:
    config = save_run_config(cfg, layout.root / "cfg.json")
    cmd = [sys.executable, "-m", "domainbert.pretrain.worker",
           *worker_args(config, "continued", layout.root, "test-fp", throttle_s=throttle)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


# Warmup-stable-decay whose decay, and a masking phase whose change, start at step 9 of 12, after the resume
# point, with a quarter of the tokens replayed from general text.
RECIPE = ("pretrain.lr_schedule.kind=wsd", "pretrain.lr_schedule.decay_fraction=0.25",
          "pretrain.lr_schedule.decay_shape=1-sqrt",
          "pretrain.mask_schedule=[{until: 0.75, rate: 0.3}, {until: 1.0, rate: 0.15}]",
          "pretrain.replay.fraction=0.25", "finetune.only_tasks=[science-terms-ner]")


@pytest.mark.slow
@pytest.mark.parametrize(("precision", "recipe"), [*((p, ()) for p in PRECISIONS), ("fp32", RECIPE)],
                         ids=[*PRECISIONS, "fp32-wsd-masking-replay"])
def test_sigkill_and_restart_matches_uninterrupted_run(base_model, tmp_path, texts, precision, recipe):
    from mlflow import MlflowClient

    cfg = exact_cfg(base_model, precision, "pretrain.budget_tokens=1536", "pretrain.checkpoint_every=3",
                   "pretrain.keep_checkpoints=2", "pretrain.log_every=1", *recipe)  # 12 steps
    # The killed run also reports to MLflow: its restart replays the steps after the last checkpoint, and
    # the tracked run must still hold each step once.
    store = f"sqlite:///{tmp_path}/mlflow.db"
    tracked = cfg.model_copy(update={"tracking": cfg.tracking.model_copy(
        update={"report_to": ["tensorboard", "mlflow"], "mlflow_tracking_uri": store})})
    killed = RunLayout(tmp_path / "killed")
    write_corpus(killed.corpus, texts)
    if recipe:
        ensure_replay_text(cfg, killed)  # the stage builds it before it starts the workers
    proc = _worker(tracked, killed, throttle=0.4)
    ckpt_root = killed.pretrain("continued") / "checkpoints"
    deadline = time.time() + 120
    state = killed.pretrain("continued") / "tracking.json"
    # Kill between checkpoints 3 and 6, once step 4 has gone to MLflow: the restart replays step 4.
    while time.time() < deadline and not (any(step >= 3 for step, _ in ckpt.list_checkpoints(ckpt_root))
                                           and state.is_file() and json.loads(state.read_text())["sent_step"] >= 4):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not killed.pretrained_model("continued").exists()
    saved = [step for step, _ in ckpt.list_checkpoints(ckpt_root)]
    assert saved and max(saved) < 12

    sent = json.loads((killed.pretrain("continued") / "tracking.json").read_text())["sent_step"]
    restarted = _worker(tracked, killed, throttle=0.0)
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read().decode()[-2000:]
    summary = json.loads((killed.pretrain("continued") / "summary.json").read_text())
    assert summary["resumed_from"] == [max(saved)]
    if recipe:
        assert max(saved) < 9  # the decay and the masking change come after the resume point
        assert (summary["general_tokens"], summary["domain_tokens"]) == (384, 1152)
    assert summary["steps"] == 12 and summary["tokens_consumed"] == 1536
    assert len(ckpt.list_checkpoints(ckpt_root)) <= 2  # keep_checkpoints

    # The reference: the same config, uninterrupted, in this process.
    whole = RunLayout(tmp_path / "whole")
    write_corpus(whole.corpus, texts)
    reference = pretrain_arm(cfg, "continued", whole)
    assert reference["resumed_from"] == []
    assert (summary["precision"], summary["torch_threads"]) == (reference["precision"], reference["torch_threads"])
    assert [s for s, _ in summary["loss_curve"]] == list(range(1, 13))
    for (_, a), (_, b) in zip(summary["loss_curve"], reference["loss_curve"], strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    assert sent > max(saved), "the kill came after a checkpoint's step was logged, so steps are replayed"
    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name("domainbert-science").experiment_id])
    assert run.info.status == "FINISHED"
    history = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")]
    assert sorted(step for step, _ in history) == list(range(1, 13))  # each step once, none twice
    for (step, value), (_, want) in zip(sorted(history), reference["loss_curve"], strict=True):
        assert value == pytest.approx(want, abs=1e-4), step
    assert [s for s, _ in tensorboard_scalars(killed.pretrain("continued") / "tensorboard")["train/loss"]] == \
        list(range(1, 13))
    got = load_file(killed.pretrained_model("continued") / "model.safetensors")
    want = load_file(whole.pretrained_model("continued") / "model.safetensors")
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=1e-4, msg=key)
