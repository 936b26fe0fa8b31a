"""Ctrl-C and SIGTERM sent to the whole process group of ``domainbert run``, as a terminal sends Ctrl-C: early
(the vocabulary stage starting) and late (a fine-tuning run training, in the command or on local Dask worker
processes, which are in the group too and must not die of Ctrl-C with their own tracebacks). The temporary
Prefect API server lives in a session of its own, so it outlives the flow; the command ends within
``STOP_WITHIN_S`` with 130 or 143, one INFO line naming the command to rerun, the stages Cancelled at INFO, no
ERROR, no traceback, the lock released, and no queued run started after the stop."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from support.flows import STOP_WITHIN_S, base_env, signal_when

pytestmark = [pytest.mark.slow]


def _assert_a_quiet_stop(code: int, took: float, log: str, sig: signal.Signals, out: Path) -> None:
    assert code == 128 + sig, log[-3000:]
    assert took < STOP_WITHIN_S, (took, log[-3000:])
    for noise in ("ERROR", "Traceback", "Crash detected", "Crashed", "Error logging to API", "ConnectError"):
        assert noise not in log, (noise, log[-3000:])
    stopped = [line for line in log.splitlines() if "to continue, rerun: domainbert run" in line]
    assert len(stopped) == 1 and " INFO " in stopped[0] and f"stopped by {sig.name}" in stopped[0], log[-3000:]
    assert "Finished in state Cancelled" in log, log[-3000:]
    assert not (out / ".lock").exists()


def test_ctrl_c_to_the_process_group_stops_run_early_and_late(tiny_domain: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs" / "tiny"
    env = base_env(tmp_path / "prefect-home")
    overrides = ["finetune.epochs=3000", "finetune.early_stopping_patience=100000", "finetune.only_tasks=[terms-ner]"]
    cmd = [str(Path(sys.executable).with_name("domainbert")), "run", str(tiny_domain), *overrides, "--out", str(out)]

    code, took, before, log = signal_when(cmd, env, "for flow 'domainbert-vocab'", signal.SIGINT, group=True)
    _assert_a_quiet_stop(code, took, log, signal.SIGINT, out)
    # The overrides as the run received them, brackets included (Prefect's CLI echo drops a bracketed word).
    assert f"overrides {' '.join(overrides)})" in before, before[-3000:]
    assert not (out / "vocab" / "report.json").exists()  # stopped in the vocabulary stage, before its outputs

    for sig, workers in ((signal.SIGTERM, "0"), (signal.SIGINT, "2")):  # local Dask worker processes: in the group
        code, took, _, log = signal_when([*cmd, "--workers", workers], env, "training 24 examples", sig, group=True)
        _assert_a_quiet_stop(code, took, log, sig, out)
        if workers == "0":  # one run at a time: the queued runs do not start after the stop
            assert "] fine-tuning " not in log, log[-3000:]
        assert not [p for p in out.glob("finetune/*/terms-ner/seed-*/result.json") if "/floor/" not in p.as_posix()]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_process_group_stops_a_stage_command(tiny_domain: Path, tmp_path: Path, sig) -> None:
    """A stage command (no Prefect): stopped inside its stage, one INFO line, the lock released."""
    out = tmp_path / "runs" / "tiny"
    cmd = [str(Path(sys.executable).with_name("domainbert")), "corpus", str(tiny_domain), "--out", str(out)]
    code, took, _, log = signal_when(cmd, base_env(tmp_path / "prefect-home"), "corpus: building tiny", sig,
                                     group=True)
    assert code == 128 + sig and took < STOP_WITHIN_S, log
    assert "Traceback" not in log and "ERROR" not in log, log
    assert [line for line in log.splitlines() if " INFO " in line] == [
        line for line in log.splitlines() if f"stopped by {sig.name}; to continue, rerun: domainbert corpus" in line
    ], log
    assert "stopped by" in log and not (out / ".lock").exists() and not (out / "corpus" / "manifest.json").exists()
