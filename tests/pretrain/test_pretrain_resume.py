"""Exact resume: a run killed with SIGKILL and restarted ends with the same weights as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from pretrain_fixtures import make_cfg, write_corpus
from safetensors.torch import load_file

from domainbert.paths import RunLayout
from domainbert.pretrain import checkpoint as ckpt
from domainbert.pretrain.launch import save_run_config, worker_args
from domainbert.pretrain.stage import pretrain_arm


def _worker(cfg, layout: RunLayout, throttle: float) -> subprocess.Popen:
    config = save_run_config(cfg, layout.root / "cfg.json")
    cmd = [sys.executable, "-m", "domainbert.pretrain.worker",
           *worker_args(config, "continued", layout.root, "test-fp", throttle_s=throttle)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


@pytest.mark.slow
def test_sigkill_and_restart_matches_uninterrupted_run(base_model, tmp_path, texts):
    cfg = make_cfg(base_model, "pretrain.budget_tokens=1536", "pretrain.checkpoint_every=3",
                   "pretrain.keep_checkpoints=2")  # 12 steps
    killed = RunLayout(tmp_path / "killed")
    write_corpus(killed.corpus, texts)
    proc = _worker(cfg, killed, throttle=0.4)
    ckpt_root = killed.pretrain("continued") / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline and not any(step >= 3 for step, _ in ckpt.list_checkpoints(ckpt_root)):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not killed.pretrained_model("continued").exists()
    saved = [step for step, _ in ckpt.list_checkpoints(ckpt_root)]
    assert saved and max(saved) < 12

    restarted = _worker(cfg, killed, throttle=0.0)
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read().decode()[-2000:]
    summary = __import__("json").loads((killed.pretrain("continued") / "summary.json").read_text())
    assert summary["resumed_from"] == [max(saved)]
    assert summary["steps"] == 12 and summary["tokens_consumed"] == 1536
    assert len(ckpt.list_checkpoints(ckpt_root)) <= 2  # keep_checkpoints

    # The reference: the same config, uninterrupted, in this process.
    torch.set_num_threads(1)
    whole = RunLayout(tmp_path / "whole")
    write_corpus(whole.corpus, texts)
    reference = pretrain_arm(cfg, "continued", whole)
    assert reference["resumed_from"] == []
    assert [s for s, _ in summary["loss_curve"]] == list(range(1, 13))
    for (_, a), (_, b) in zip(summary["loss_curve"], reference["loss_curve"], strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    got = load_file(killed.pretrained_model("continued") / "model.safetensors")
    want = load_file(whole.pretrained_model("continued") / "model.safetensors")
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=1e-4, msg=key)
