"""The results a fine-tuning configuration expects, written into the run so that readers need not recompute them.

``expected_runs`` lists every result the configuration asks for (each configured arm counts, trained or
not) with the fingerprint a current result carries; it hashes each task's files once. The stage writes the
list to ``finetune/expected.json`` (``write_expected``) before it runs anything, and the report and ``plan``
read it back (``read_expected``) and judge each stored result by comparing fingerprints alone
(``result_state``): no task file is read again. This module trains nothing and renders nothing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import BaseModel

from domainbert.config.domain import DomainConfig
from domainbert.core.artifacts import damage, is_complete, read_record, write_json_atomic
from domainbert.core.paths import RunLayout
from domainbert.finetune.jobs import RESULT, only_models, references, run_list, run_record, task_config
from domainbert.task_data.splits import task_data_hash

log = logging.getLogger(__name__)
EXPECTED = "expected.json"
EXPECTED_FORMAT = 1


class ExpectedRun(BaseModel):
    """One result the configuration asks for, and the fingerprint that makes a stored one current."""

    model: str
    task: str
    seed: int
    mode: str
    fingerprint: str


def expected_path(layout: RunLayout) -> Path:
    return layout.root / "finetune" / EXPECTED


def expected_runs(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> list[ExpectedRun]:
    """Every run of the matrix for every configured arm (trained or not), in run order, with its fingerprint;
    ``planned``: with the references as ``domainbert run`` will make them (``jobs.references``)."""
    models = only_models(
        cfg,
        {
            **references(cfg, layout, planned),
            **{arm: str(layout.pretrained_model(arm)) for arm in cfg.pretrain.replicate_names()},
            **cfg.finetune.extra_models,
        },
    )
    hashes: dict[str, str] = {}
    out = []
    for job in run_list(cfg, layout, models):
        if job.task_name not in hashes:
            hashes[job.task_name] = task_data_hash(task_config(cfg, job.task_name))
        fp = run_record(cfg, job, hashes[job.task_name])[2]
        out.append(ExpectedRun(model=job.model_name, task=job.task_name, seed=job.seed, mode=job.mode, fingerprint=fp))
    return out


def write_expected(cfg: DomainConfig, layout: RunLayout) -> Path:
    """Write ``finetune/expected.json`` (atomically) for this configuration; returns its path."""
    path = expected_path(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"format": EXPECTED_FORMAT, "runs": [r.model_dump() for r in expected_runs(cfg, layout)]})
    return path


def read_expected(layout: RunLayout) -> list[ExpectedRun] | None:
    """The list the fine-tuning stage wrote into the run, or None (not written yet, or of another format)."""
    path = expected_path(layout)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != EXPECTED_FORMAT:
        return None
    return [ExpectedRun.model_validate(r) for r in data.get("runs", [])]


def result_state(layout: RunLayout, run: ExpectedRun) -> str:
    """``missing`` (no result), ``unrecorded`` (a result without its record: written by hand or damaged),
    ``damaged`` (its files no longer match their record: edited or truncated; a warning names the file),
    ``stale`` (recorded with another fingerprint) or ``current``."""
    folder = layout.finetune(run.model, run.task, run.seed)
    if not (folder / RESULT).is_file():
        return "missing"
    record = read_record(folder)
    if record is None:
        return "unrecorded"
    problem = damage(folder, record)
    if problem is not None:  # a result is trusted only as its record wrote it: never published, rerun instead
        log.warning("%s; left out, fine-tuning recomputes it", problem)
        return "damaged"
    return "current" if is_complete(folder, run.fingerprint) else "stale"
