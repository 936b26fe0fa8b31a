"""A scheduler's SIGTERM to ``domainbert run`` while fine-tuning runs, in-process (``--workers 0``: a thread of
the command) and on local Dask worker processes (``--workers 2``): the command ends within seconds with exit
143, the running runs stop at their next step and write nothing, and the next command picks up from there."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from support.flows import STOP_WITHIN_S, base_env, signal_when

pytestmark = [pytest.mark.slow]


def _terminate_during_finetuning(cmd: list[str], env: dict[str, str]) -> tuple[int, float, str]:
    """SIGTERM the process of ``cmd`` (not its group, as Kubernetes signals a container's main process) two
    seconds into the first fine-tuning run; (exit status, seconds from the signal to the exit, output)."""
    code, took, before, after = signal_when(cmd, env, "training 24 examples", signal.SIGTERM, group=False,
                                            settle_s=2.0)  # a fit loop has started
    return code, took, before[-1500:] + after[-3000:]


def test_sigterm_under_run_stops_fine_tuning_in_threads_and_in_worker_processes(tiny_domain: Path,
                                                                                 tmp_path: Path) -> None:
    out = tmp_path / "runs" / "tiny"
    env = base_env(tmp_path / "prefect-home")
    cmd = [str(Path(sys.executable).with_name("domainbert")), "run", str(tiny_domain), "finetune.epochs=3000",
           "finetune.seeds=[1, 2]", "finetune.early_stopping_patience=100000", "--out", str(out)]
    # Runs of 9,000 steps: without the stop reaching them they would train for many minutes.
    for workers in ("0", "2"):  # the second run starts from the first one's finished stages
        code, took, log = _terminate_during_finetuning([*cmd, "--workers", workers], env)
        assert code == 143, log
        assert took < STOP_WITHIN_S, (workers, took, log)
        assert "stopped by SIGTERM" in log
        assert not [p for p in out.glob("finetune/*/terms-ner/seed-*/result.json") if "/floor/" not in p.as_posix()]
        assert not [p for p in out.glob("finetune/**/*") if ".tmp-" in p.name], "a half-written run was left"
        assert not (out / ".lock").exists()
