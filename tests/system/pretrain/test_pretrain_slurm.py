"""deploy/slurm/pretrain.sbatch under bash as Slurm would start it: SIGUSR1 ahead of the time limit reaches the
training worker through torchrun, the worker checkpoints and exits 138, the script exits after it and requeues.

Slurm is not installed: ``srun`` and ``scontrol`` are small stand-ins on PATH (srun runs its command in place;
scontrol answers ``show hostnames`` and records every other call). Everything else is real: the script's config
step, torchrun and a 2-layer worker on a tiny corpus.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domainbert.core.paths import RunLayout, project_root
from domainbert.pretrain import checkpoint as ckpt
from support.pretrain import write_corpus

SBATCH = project_root() / "deploy" / "slurm" / "pretrain.sbatch"

SRUN = """#!/bin/bash
# srun stand-in: drop srun's own options, run the command in this process (so signals reach it directly)
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
exec "$@"
"""
SCONTROL = """#!/bin/bash
# scontrol stand-in: the node list for `show hostnames`, every other call recorded
if [[ $1 == show && $2 == hostnames ]]; then echo 127.0.0.1; exit 0; fi
echo "$*" >> "$SCONTROL_LOG"
"""


def _stand_ins(folder: Path) -> Path:
    folder.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _trained_steps(metrics: Path) -> int:
    if not metrics.is_file():
        return 0
    return max((json.loads(line)["step"] for line in metrics.read_text().splitlines() if '"train"' in line),
               default=0)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM])
def test_stop_signal_checkpoints_through_torchrun_and_usr1_requeues(base_model, texts, tmp_path, sig):
    """USR1 (the time limit is near) is requeued; TERM (scancel, a draining node) checkpoints but is not."""
    run = RunLayout(tmp_path / "run")
    write_corpus(run.corpus, texts)
    bin_dir = _stand_ins(tmp_path / "bin")
    log = tmp_path / "scontrol.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SCONTROL_LOG": str(log),
           "PYTHON": sys.executable, "GPUS_PER_NODE": "1", "MASTER_PORT": str(_free_port()),
           "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node1", "SLURM_NNODES": "1", "OMP_NUM_THREADS": "1",
           "STOP_GRACE_S": "60"}
    overrides = [f"base_model.name_or_path={base_model}", "pretrain.arms=[continued]", "pretrain.seq_len=32",
                 "pretrain.batch_size=4", "pretrain.budget_tokens=1000000", "pretrain.eval_documents=4",
                 "pretrain.log_every=1", "pretrain.checkpoint_every=100000", "pretrain.scratch_size=base_config"]
    output = tmp_path / "slurm-4242.out"
    with output.open("w") as out:
        script = subprocess.Popen(["bash", str(SBATCH), "science", "continued", str(run.root), "offline",
                                   *overrides], env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    metrics = run.pretrain("continued") / "metrics.jsonl"
    deadline = time.time() + 120
    while _trained_steps(metrics) < 1:
        assert script.poll() is None, output.read_text()[-3000:]
        assert time.time() < deadline, "no training step within 120 s"
        time.sleep(0.1)
    script.send_signal(sig)  # USR1: what Slurm sends 300 s before the limit (--signal=B:USR1@300)
    script.wait(timeout=90)
    out = output.read_text()
    assert f"got {sig.name}; passing it on" in out, out[-3000:]
    stopped = re.search(rf"stopped by {sig.name} at pretraining step (\d+)", out)  # the worker got it via torchrun
    assert stopped, out[-3000:]
    assert script.returncode != 0  # torchrun's own status (1) after its worker's graceful 128 + signal
    if sig == signal.SIGUSR1:
        assert f"the step stopped with status {script.returncode}; requeueing" in out
        assert log.read_text().splitlines() == ["requeue 4242"]
    else:
        assert not log.exists() and "requeueing" not in out
    saved = [step for step, _ in ckpt.list_checkpoints(run.pretrain("continued") / "checkpoints")]
    assert saved == [int(stopped.group(1))] == [_trained_steps(metrics)]  # a checkpoint where the signal ended it
    assert not run.pretrained_model("continued").exists()  # not finished: the requeued job resumes from it
