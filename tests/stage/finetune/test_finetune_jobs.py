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



def test_a_flow_says_a_tasks_overlap_once_for_all_its_workers_and_they_say_it_at_debug(caplog, monkeypatch) -> None:
    """The fine-tuning flow logs ``overlap_lines`` before its runs start; each run, in whichever worker process,
    reads the task inside ``overlaps_said_by_caller`` and says it at DEBUG (two workers said it twice before)."""
    monkeypatch.setattr(jobs, "_said_overlaps", set())
    cfg = load_domain("science", ["finetune.only_tasks=[science-terms-ner]"], profile="offline")
    [task] = cfg.finetune.tasks
    [line] = jobs.overlap_lines(cfg)
    assert line.startswith("task science-terms-ner: examples also in its training split: validation 31 of 1000")
    assert line.endswith("; left out of scoring")
    with caplog.at_level(logging.DEBUG, logger=jobs.logger.name):
        jobs.load_task_data(cfg, task)  # the flow's own process (the report reads tasks there) does not repeat it
        monkeypatch.setattr(jobs, "_said_overlaps", set())  # a worker process
        with jobs.overlaps_said_by_caller():
            jobs.load_task_data(cfg, task)  # its first run of the task
        monkeypatch.setattr(jobs, "_said_overlaps", set())
        jobs.load_task_data(cfg, task)  # outside the context a process says it itself
    said = [r for r in caplog.records if "examples also in its training split" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in said] == [(logging.DEBUG, line)] * 2 + [(logging.WARNING, line)]
    kept = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"split_overlap": "keep"})})
    assert jobs.overlap_lines(kept) == [line.replace("left out of scoring", "kept")]

def test_eval_delay_is_in_a_runs_record_when_set_left_out_at_0_and_never_in_the_floors() -> None:
    """Results stored before ``eval_delay`` existed stay current (0 is left out); a delay changes which epoch a
    run may keep, so it is part of the run's record, and not of the floor's, which validates nothing."""
    cfg = load_domain("science", ["finetune.only_tasks=[science-terms-ner]"], profile="offline")
    [task] = cfg.finetune.tasks
    assert task.eval_delay == 3  # the shipped profile validates the NER task's epochs 3 and 4
    tasks = [task.model_copy(update={"eval_delay": 0})]
    plain = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"tasks": tasks})})
    run = jobs.Job("base", "no/such-model", task.name, 1, "finetune")
    delayed, undelayed = jobs.run_record(cfg, run, "data")[0], jobs.run_record(plain, run, "data")[0]
    assert delayed["task"]["eval_delay"] == 3 and "eval_delay" not in undelayed["task"]
    assert jobs.run_record(cfg, run, "data")[2] != jobs.run_record(plain, run, "data")[2]
    floor = jobs.Job(jobs.FLOOR, jobs.FLOOR, task.name, jobs.FLOOR_SEED, jobs.FLOOR)
    assert jobs.run_record(cfg, floor, "data")[2] == jobs.run_record(plain, floor, "data")[2]
