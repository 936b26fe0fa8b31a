"""``finetune.jobs.load_task_data``: what a run reads of its task, and what it says about it."""

from __future__ import annotations

import logging

from domainbert.config.domain import load_domain
from domainbert.finetune import jobs


def test_examples_shared_with_train_are_a_warning_once_a_process_not_once_a_run(caplog, monkeypatch) -> None:
    monkeypatch.setattr(jobs, "_said_overlaps", set())
    cfg = load_domain("science", ["finetune.only_tasks=[science-terms-ner]"], profile="offline")
    [task] = cfg.finetune.tasks  # the shipped task shares 48 test sentences with its training split
    with caplog.at_level(logging.DEBUG, logger=jobs.logger.name):
        runs = [jobs.load_task_data(cfg, task) for _ in range(3)]  # three runs of the task in one worker
    said = [r for r in caplog.records if "examples also in its training split" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert all(d.split_overlap["excluded"] and d.split_overlap["test"]["normalised"] > 0 for d in runs)
