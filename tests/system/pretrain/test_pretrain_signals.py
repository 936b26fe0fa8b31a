"""SIGTERM/SIGUSR1 during pretraining: a checkpoint at the next step boundary, exit 128+signal, exact resume."""

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
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import PRECISIONS, exact_cfg, write_corpus


def _worker(cfg, layout: RunLayout, throttle: float) -> subprocess.Popen:
    config = save_run_config(cfg, layout.root / "cfg.json")
    cmd = [sys.executable, "-m", "domainbert.pretrain.worker",
           *worker_args(config, "continued", layout.root, "test-fp", throttle_s=throttle)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _trained_steps(layout: RunLayout) -> int:
    path = layout.pretrain("continued") / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines() if '"train"' in line]
    return max(steps, default=0)


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_stop_signal_checkpoints_exits_and_resumes_exactly(base_model, tmp_path, texts, sig, precision):
    cfg = exact_cfg(base_model, precision, "pretrain.budget_tokens=1536", "pretrain.checkpoint_every=5",
                   "pretrain.log_every=1")  # 12 steps, periodic checkpoints at 5 and 10
    run = RunLayout(tmp_path / "stopped")
    write_corpus(run.corpus, texts)
    proc = _worker(cfg, run, throttle=0.5)
    deadline = time.time() + 120
    while time.time() < deadline and _trained_steps(run) < 2:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    sent = time.monotonic()
    os.kill(proc.pid, sig)
    assert proc.wait(timeout=30) == 128 + sig
    assert time.monotonic() - sent < 5
    assert not run.pretrained_model("continued").exists()
    saved = [step for step, _ in ckpt.list_checkpoints(run.pretrain("continued") / "checkpoints")]
    stopped_at = max(saved)
    assert 2 <= stopped_at < 12  # with the next line: a checkpoint at the step the signal ended the run
    assert stopped_at == _trained_steps(run)

    restarted = _worker(cfg, run, throttle=0.0)
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read().decode()[-2000:]
    summary = json.loads((run.pretrain("continued") / "summary.json").read_text())
    assert summary["resumed_from"] == [stopped_at] and summary["steps"] == 12

    whole = RunLayout(tmp_path / "whole")
    write_corpus(whole.corpus, texts)
    reference = pretrain_arm(cfg, "continued", whole)
    assert (summary["precision"], summary["torch_threads"]) == (reference["precision"], reference["torch_threads"])
    for (_, a), (_, b) in zip(summary["loss_curve"], reference["loss_curve"], strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    got = load_file(run.pretrained_model("continued") / "model.safetensors")
    want = load_file(whole.pretrained_model("continued") / "model.safetensors")
    for key in want:
        torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=1e-4, msg=key)


@pytest.mark.slow
def test_sigterm_to_the_command_alone_stops_a_two_rank_torchrun_launch_promptly(base_model, layout):
    """What Kubernetes does: SIGTERM to the command (PID 1 of the pod), not to its training processes. Every
    rank checkpoints at its next step, the command exits 143 within seconds, no process is left behind, the
    run's lock is free and the same command resumes from the checkpoint."""
    import socket

    import psutil

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "domainbert.cli", "pretrain", "science", "pretrain.arms=[continued]",
            f"base_model.name_or_path={base_model}", "pretrain.seq_len=32", "pretrain.batch_size=4",
            "pretrain.budget_tokens=400000", "pretrain.eval_documents=10", "pretrain.log_every=1",
            "pretrain.checkpoint_every=1000",
            "pretrain.launch.launcher=torchrun", "pretrain.launch.num_processes=2",
            f"pretrain.launch.master_port={port}", "--out", str(layout.root)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DOMAINBERT_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        deadline = time.time() + 180
        while time.time() < deadline and _trained_steps(layout) < 3:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            time.sleep(0.1)
        family = psutil.Process(proc.pid).children(recursive=True)
        ranks = [p for p in family if "domainbert.pretrain.worker" in " ".join(p.cmdline())
                 and "torch.distributed.run" not in " ".join(p.cmdline())]
        assert len(ranks) == 2, [p.cmdline() for p in family]
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 143, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() - sent < 10
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.5)
    assert not [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert "Traceback" not in stderr and "stopped by SIGTERM" in stderr, stderr[-2000:]
    saved = [step for step, _ in ckpt.list_checkpoints(layout.pretrain("continued") / "checkpoints")]
    assert saved and max(saved) >= 3 and not layout.pretrained_model("continued").exists()
    from domainbert.core.runlock import run_lock

    with run_lock(layout.root, "test"):  # released: taking it again does not wait or fail
        pass
