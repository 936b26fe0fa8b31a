"""progress.py: when progress lines are due, their ETA, and the [model/task/seed] tag on a run's log records."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from domainbert.core.progress import ProgressLine, current_tag, duration, tagged


def test_lines_on_the_first_step_every_n_steps_and_the_last():
    line = ProgressLine(10, every_s=3600, every_steps=4)
    assert [step for step in range(1, 11) if line.due(step)] == [1, 4, 8, 10]


def test_lines_every_so_many_seconds(monkeypatch):
    monkeypatch.setenv("DOMAINBERT_PROGRESS_SECONDS", "0.05")
    line = ProgressLine(1000)
    assert line.due(1) and not line.due(2)
    time.sleep(0.06)
    assert line.due(3) and not line.due(4)


def test_eta_counts_only_the_steps_of_this_session():
    line = ProgressLine(100, initial=50, every_s=0)
    line.start -= 10.0  # 10 s for 25 steps since the resume at step 50
    assert line.eta_s(50) is None
    assert line.eta_s(75) == pytest.approx(10.0, rel=0.01)


def test_duration():
    assert [duration(s) for s in (None, 4.4, 65, 3725)] == ["?", "4s", "1m05s", "1h02m"]


@tagged("{model}/{task}/seed-{seed}")
def _run(model: str, task: str, seed: int = 0, *, barrier: threading.Barrier | None = None) -> None:
    log = logging.getLogger("domainbert.test_progress")
    log.info("start %d%%", 50)
    if barrier:
        barrier.wait()  # both runs are inside their tags at once
    log.info("end")


def test_a_runs_records_carry_its_tag_also_in_parallel_threads(caplog):
    caplog.set_level("INFO", logger="domainbert.test_progress")
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=_run, args=(m, "ner"), kwargs={"seed": s, "barrier": barrier})
               for m, s in (("base", 1), ("continued", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _run("floor", "cls")
    messages = sorted(r.getMessage() for r in caplog.records)
    assert messages == ["[base/ner/seed-1] end", "[base/ner/seed-1] start 50%", "[continued/ner/seed-2] end",
                        "[continued/ner/seed-2] start 50%", "[floor/cls/seed-0] end", "[floor/cls/seed-0] start 50%"]
    assert current_tag() is None
    logging.getLogger("domainbert.test_progress").info("untagged")
    assert caplog.records[-1].getMessage() == "untagged"


def test_a_loop_of_unknown_length_gets_its_first_line_then_lines_by_time_and_its_last_once_the_total_is_known():
    line = ProgressLine(None, every_s=3600)
    assert line.due(1) and not line.due(2) and line.eta_s(2) is None
    line.total = 3
    assert line.due(3)
