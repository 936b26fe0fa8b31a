"""A cancel and a stop, task by task, on a real Prefect server: the task a cancel or a stop interrupts ends
Cancelled, logged at INFO, and its flow stops Cancelled, with no ERROR, no traceback and no "Crash detected".

The flow below is what every stage flow is (``@cancellable`` over a task with ``@cancellable_task``, its result
passed through ``unless_cancelled``); its task does what a cancel from the UI leads to: the flow run is set
Cancelling on the API, then the training loop raises ``StopRequested`` at its next step ("cancel"), or the
runner's SIGTERM reaches a task with no loop of its own, as the base warm-up is ("signal"). "stop" is a
scheduler's SIGTERM that nobody cancelled.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.flows import REPO, base_env, task_states

pytestmark = [pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from prefect import flow, task
    from domainbert.core.signals import StopRequested
    from domainbert.flows.cancelling import cancellable, cancellable_task, quiet_cancelled_tasks, unless_cancelled

    @task(name="train")
    @cancellable_task
    def train(mode: str) -> int:
        if mode in ("cancel", "signal"):  # what the UI does: the run is set Cancelling, then the runner's SIGTERM stops the step
            from prefect.client.orchestration import get_client
            from prefect.context import FlowRunContext
            from prefect.states import Cancelling
            with get_client(sync_client=True) as client:
                client.set_flow_run_state(FlowRunContext.get().flow_run.id, Cancelling(), force=True)
        if mode == "signal":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)  # never reached: the signal stops the task here
        raise StopRequested(signal.SIGTERM, "at step 3")

    @task(name="after")
    def after() -> int:
        return 1

    @flow(name="stage")
    @cancellable
    def stage(mode: str) -> int:
        quiet_cancelled_tasks()
        unless_cancelled(train(mode))
        return after()  # never reached: the flow stops where its task stopped

    from prefect.exceptions import Abort
    try:
        stage(sys.argv[1])
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


def _assert_cancelled_at_info(code: int, log: str, states: dict[str, list[str]], said: str) -> None:
    assert code == 0, log[-3000:]
    assert states == {"train": ["Cancelled"]}, (states, log[-3000:])  # "after" never ran
    finished = [line for line in log.splitlines() if "Finished in state Cancelled" in line]
    assert finished and all("| INFO" in line for line in finished), log[-3000:]
    assert "| ERROR" not in log and "Traceback" not in log and "Crash detected" not in log, log[-3000:]
    assert f"aborted: {said}" in log, log[-3000:]  # the outermost flow's way out, Cancelled


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("cancel", "cancelled (stopped by SIGTERM at step 3"),
        ("signal", "cancelled (stopped by SIGTERM;"),  # the warm-up's case: no step boundary to stop at
        ("stop", "stopped by SIGTERM at step 3; rerun the same command to continue"),
    ],
)
def test_a_cancel_or_a_stop_ends_the_interrupted_task_cancelled_at_info(
        sqlite_server: tuple[str, Path], tmp_path: Path, mode: str, said: str) -> None:
    url, home = sqlite_server
    _assert_cancelled_at_info(*_run(mode, url, home, tmp_path), said)
