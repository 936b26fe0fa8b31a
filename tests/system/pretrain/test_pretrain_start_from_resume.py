"""Exact resume of an arm started from another arm's checkpoint (``pretrain.start_from``, no re-warm-up): killed
with SIGKILL and restarted, it ends with the weights and learning rates of an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil
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
from domainbert.pretrain.general_text import ensure_general_text
from domainbert.pretrain.launch import worker_args
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import exact_cfg, write_corpus


def _worker(cfg, layout: RunLayout, throttle: float) -> subprocess.Popen:
    config = save_run_config(cfg, layout.root / "cfg.json")
    cmd = [sys.executable, "-m", "domainbert.pretrain.worker",
           *worker_args(config, "control", layout.root, "test-fp", throttle_s=throttle)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lrs(layout: RunLayout) -> list[float]:
    """The logged rate of each step; a step replayed after the restart counts as logged last."""
    lines = (layout.pretrain("control") / "metrics.jsonl").read_text().splitlines()
    by_step = {r["step"]: r["lr"] for r in map(json.loads, lines) if r["kind"] == "train"}
    return [by_step[step] for step in sorted(by_step)]


@pytest.mark.slow
def test_sigkill_and_restart_of_a_started_arm_matches_uninterrupted_run(base_model, tmp_path, texts):
    # 12 steps an arm, checkpoints every 3; control starts from continued's step 6, at the peak, and decays
    # (1-sqrt) over the last 4 of 6 + 12 steps: its steps 9 to 12, after the resume point
    cfg = exact_cfg(base_model, "fp32", "pretrain.arms=[continued, control]", "pretrain.budget_tokens=1536",
                    "pretrain.checkpoint_every=3", "pretrain.keep_checkpoints=1", "pretrain.log_every=1",
                    "pretrain.watch_points=0", "pretrain.lr=1.0e-3", "pretrain.lr_schedule.kind=wsd",
                    "pretrain.lr_schedule.decay_fraction=0.25", "pretrain.lr_schedule.decay_shape=1-sqrt",
                    "pretrain.start_from={control: {arm: continued, step: 6}}",
                    "finetune.only_tasks=[science-terms-ner]")
    whole = RunLayout(tmp_path / "whole")
    write_corpus(whole.corpus, texts)
    pretrain_arm(cfg, "continued", whole)
    reference = pretrain_arm(cfg, "control", whole)

    killed = RunLayout(tmp_path / "killed")
    write_corpus(killed.corpus, texts)
    shutil.copytree(whole.pretrain("continued"), killed.pretrain("continued"))
    ensure_general_text(cfg, killed)  # the stage builds it before it starts the workers
    proc = _worker(cfg, killed, throttle=0.4)
    ckpt_root = killed.pretrain("control") / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline and not any(step >= 3 for step, _ in ckpt.list_checkpoints(ckpt_root)):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    saved = [step for step, _ in ckpt.list_checkpoints(ckpt_root)]
    assert saved and max(saved) < 12 and not killed.pretrained_model("control").exists()

    restarted = _worker(cfg, killed, throttle=0.0)
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read().decode()[-2000:]
    summary = json.loads((killed.pretrain("control") / "summary.json").read_text())
    assert summary["resumed_from"] == [max(saved)]
    assert summary["start_head"] == "the continued arm's at step 6"
    for (_, a), (_, b) in zip(summary["loss_curve"], reference["loss_curve"], strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    # the restart's rates are the uninterrupted run's: the stable peak from the start, then the decay
    assert _lrs(killed) == pytest.approx(_lrs(whole), abs=1e-12)
    assert len(_lrs(whole)) == 12 and _lrs(whole)[:6] == [1e-3] * 6 and _lrs(whole)[-1] == 0.0
    got = load_file(killed.pretrained_model("control") / "model.safetensors")
    want = load_file(whole.pretrained_model("control") / "model.safetensors")
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=1e-4, msg=key)
