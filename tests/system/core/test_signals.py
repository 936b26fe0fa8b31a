"""Graceful stop: SIGTERM during fine-tuning ends the CLI within seconds with exit 143, nothing half-written; the
first signal reaches the command's other processes through the stop file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from domainbert.core import signals


def test_signal_sets_the_flag_and_a_second_one_raises():
    signals.reset()
    with signals.graceful_stop():
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.01)
        assert signals.stop_requested() and signals.requested_signal() == signal.SIGUSR1
        with pytest.raises(signals.StopRequested) as info:
            signals.check("here")
        assert "SIGUSR1 here" in str(info.value) and signals.exit_code(info.value.signum) == 138
        with pytest.raises(signals.StopRequested, match="second signal"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
    signals.reset()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored


@pytest.mark.slow
def test_sigterm_during_finetuning_exits_143_within_seconds(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "from domainbert.cli import main; main()", "finetune", "science",
           "finetune.seeds=[1]", "finetune.epochs=30", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = []
    deadline = time.time() + 240
    for line in proc.stdout:
        lines.append(line)
        if "training " in line and " steps" in line:  # the fit loop has started
            break
        assert time.time() < deadline, "".join(lines)[-2000:]
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 143, "".join(lines)[-1500:] + rest[-1500:]
    assert time.monotonic() - sent < 10  # within a scheduler's 30 s grace period, with room for a loaded machine
    assert "stopped by SIGTERM" in rest and "Traceback" not in rest
    assert not list(out.glob("finetune/base/*/seed-1/result.json"))  # the interrupted run wrote nothing
    assert not list(out.glob("finetune/**/*.tmp-*"))
    assert not (out / ".lock").exists()


def test_the_first_signal_reaches_the_commands_other_processes_through_the_stop_file(tmp_path):
    """A Dask worker or a launcher's training process does not receive the SIGTERM a scheduler sends to the
    command; it sees the stop file the command's handler writes, and the file goes when the command ends."""
    signals.reset()
    child = [sys.executable, "-c", "from domainbert.core import signals; signals.check('in the child')"]
    with signals.graceful_stop():
        path = os.environ[signals.STOP_FILE_ENV]
        assert subprocess.run(child, capture_output=True).returncode == 0  # nothing asked yet
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert open(path).read() == str(int(signal.SIGTERM))
        done = subprocess.run(child, capture_output=True, text=True)
        assert done.returncode != 0 and "stopped by SIGTERM in the child" in done.stderr
        signals.reset()
    assert signals.STOP_FILE_ENV not in os.environ and not os.path.exists(path)


def test_a_signal_stops_at_once_except_inside_a_loop_that_checkpoints():
    """Ctrl-C or SIGTERM anywhere in a command raises at once; inside ``graceful_stop`` (a training loop) the
    first one is only recorded, and an inner ``stoppable`` raises a recorded stop as it opens."""
    signals.reset()
    before = signal.getsignal(signal.SIGINT)  # Python's default, or what the test process was started with
    with signals.stoppable():
        with pytest.raises(signals.StopRequested) as info:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        assert signals.exit_code(info.value.signum) == 130
        signals.reset()
        with signals.graceful_stop():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            assert signals.requested_signal() == signal.SIGINT  # recorded, not raised
            with pytest.raises(signals.StopRequested, match="stopped by SIGINT"):
                with signals.stoppable():
                    pass
    signals.reset()
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_a_task_a_thread_takes_up_after_a_stop_does_not_start():
    """Handlers live in the main thread only; a ``stoppable`` block a pool thread enters after a stop (the next
    queued fine-tuning run) raises at once instead of loading its model, and one entered before runs."""
    signals.reset()
    ran: list[str] = []

    def task(name: str) -> None:
        try:
            with signals.stoppable():
                ran.append(name)
        except signals.StopRequested as exc:
            ran.append(f"{name} stopped by {signal.Signals(exc.signum).name}")

    with signals.graceful_stop():
        worker = threading.Thread(target=task, args=("before",))
        worker.start()
        worker.join()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        worker = threading.Thread(target=task, args=("after",))
        worker.start()
        worker.join()
    signals.reset()
    assert ran == ["before", "after stopped by SIGTERM"]
