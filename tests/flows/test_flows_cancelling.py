"""A cancel against a stop, task by task, on a real Prefect server: the task a cancel interrupts ends Cancelled,
logged at INFO, and its flow stops Cancelled; a stop nobody cancelled (a scheduler's SIGTERM) stays a crash of
the task, to be retried or resumed.

The flow below is what every stage flow is (``@cancellable`` over a task with ``@cancellable_task``, its result
passed through ``unless_cancelled``); its task does what a cancel from the UI leads to: the flow run is set
Cancelling on the API, then the training loop raises ``StopRequested`` at its next step.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from flowkit import REPO, base_env, task_states

pytestmark = [pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import signal, sys
    from prefect import flow, task
    from domainbert.core.signals import StopRequested
    from domainbert.flows.cancelling import cancellable, cancellable_task, quiet_cancelled_tasks, unless_cancelled

    @task(name="train")
    @cancellable_task
    def train(cancel: bool) -> int:
        if cancel:  # what the UI does: the run is set Cancelling, then the runner's SIGTERM stops the step
            from prefect.client.orchestration import get_client
            from prefect.context import FlowRunContext
            from prefect.states import Cancelling
            with get_client(sync_client=True) as client:
                client.set_flow_run_state(FlowRunContext.get().flow_run.id, Cancelling(), force=True)
        raise StopRequested(signal.SIGTERM, "at step 3")

    @task(name="after")
    def after() -> int:
        return 1

    @flow(name="stage")
    @cancellable
    def stage(cancel: bool) -> int:
        quiet_cancelled_tasks()
        unless_cancelled(train(cancel))
        return after()  # never reached: the flow stops where its task stopped

    from prefect.exceptions import Abort
    try:
        stage(sys.argv[1] == "cancel")
    except Abort as exc:  # the outermost flow's way out; a worker's engine catches it the same way
        print("aborted:", exc)
""")


def _run(mode: str, url: str, home: Path, tmp_path: Path) -> tuple[int, str, dict[str, list[str]]]:
    script = tmp_path / "stage.py"
    script.write_text(SCRIPT)
    since = time.time() - 1
    proc = subprocess.run([sys.executable, str(script), mode], env=base_env(home, url), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr, task_states(url, since)


def test_a_cancel_ends_the_interrupted_task_cancelled_at_info_and_a_bare_stop_stays_a_crash(
        sqlite_server: tuple[str, Path], tmp_path: Path) -> None:
    url, home = sqlite_server
    code, log, states = _run("cancel", url, home, tmp_path)
    assert code == 0, log[-3000:]
    assert states == {"train": ["Cancelled"]}, (states, log[-3000:])  # "after" never ran
    finished = [line for line in log.splitlines() if "Finished in state Cancelled" in line]
    assert finished and all("| INFO" in line for line in finished), log[-3000:]
    assert "| ERROR" not in log and "Traceback" not in log and "Crash detected" not in log, log[-3000:]
    assert "aborted: cancelled (stopped by SIGTERM at step 3" in log  # the outermost flow's way out, Cancelled

    code, log, states = _run("stop", url, home, tmp_path)
    assert code != 0
    assert states == {"train": ["Crashed"]}, (states, log[-3000:])
    assert "Crash detected" in log
