"""The fine-tuned model kept per model and task: the seed that scored best on validation.

With ``finetune.save_models: best`` (the default) or ``all``, every run that finishes offers its model
(``offer``) to ``layout.finetuned_model(model, task)`` (``finetune/<model>/<task>/best/``): a Hugging Face
folder with the tokenizer, a card and a record whose fingerprint is the winning run's. It replaces the folder
held when it scores higher on validation (the test set never chooses; a tie goes to the lower seed), when the
held model's run is no longer current (another configuration, another base), or when it is the same seed run
again. Offers are serialised by a lock on the task's folder, so parallel runs of one group agree.

The folder is current when its record matches the current fingerprint of the seed it holds
(``held_seed``); when a finished group's best run has no model there (results made with ``save_models: none``,
or the folder was removed), that one run is rerun (``model_missing``), never the whole group.
The card is rewritten on every offer, so it names every seed compared. This module trains nothing.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.core.artifacts import atomic_output, is_complete, read_record
from domainbert.core.fingerprints import CARD
from domainbert.core.paths import RunLayout
from domainbert.finetune.expectations import ExpectedRun
from domainbert.finetune.jobs import RESULT, Job, run_record

logger = logging.getLogger(__name__)


def group_fingerprints(cfg: DomainConfig, job: Job, data_hash: str | None) -> dict[int, str]:
    """The current fingerprint of each configured seed of ``job``'s model, task and mode."""
    return {
        seed: run_record(cfg, Job(job.model_name, job.model_ref, job.task_name, seed, job.mode), data_hash)[2]
        for seed in sorted({*cfg.finetune.seeds, job.seed})
    }


def current_results(layout: RunLayout, job: Job, fps: dict[int, str]) -> dict[int, dict[str, Any]]:
    """Seed -> the group's results that are current (their folder's record matches the seed's fingerprint)."""
    out = {}
    for seed, fp in fps.items():
        folder = layout.finetune(job.model_name, job.task_name, seed)
        if (folder / RESULT).is_file() and is_complete(folder, fp):
            out[seed] = json.loads((folder / RESULT).read_text())
    return out


def _rank(seed: int, result: dict[str, Any]) -> tuple[float, int]:
    """Higher is better: the validation score of the primary metric, then the lower seed."""
    return float(result["validation"][result["primary_metric"]]), -seed


def winner(results: dict[int, dict[str, Any]]) -> int | None:
    """The seed whose result scored best on validation (ties: the lower seed) among the runs that did not
    collapse; None without such a run: a collapsed model is never kept, so never offered to push."""
    healthy = {seed: r for seed, r in results.items() if not r.get("collapsed")}
    return max(healthy, key=lambda s: _rank(s, healthy[s])) if healthy else None


def held_seed(layout: RunLayout, job: Job, fps: dict[int, str]) -> int | None:
    """The seed whose model the kept folder holds, when that run is still current; else None."""
    folder = layout.finetuned_model(job.model_name, job.task_name)
    seed = ((read_record(folder) or {}).get("config") or {}).get("seed")
    if not isinstance(seed, int) or seed not in fps or not is_complete(folder, fps[seed]):
        return None
    return seed


def model_missing(
    layout: RunLayout, job: Job, fps: dict[int, str], results: dict[int, dict[str, Any]] | None = None
) -> bool:
    """Whether ``job``'s current result is its group's best on validation and the kept folder does not hold its
    model: then this run alone must run again to provide it. ``results``: the group's ``current_results``, when
    the caller judges every run of the group (read once, not once per run)."""
    results = current_results(layout, job, fps) if results is None else results
    return job.seed in results and winner(results) == job.seed and held_seed(layout, job, fps) != job.seed


@contextmanager
def _group_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on the task's folder itself (no lock file is left behind); where the file system
    cannot lock a folder, offers go unserialised, which only parallel runs of one group could notice."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            logger.debug("cannot lock %s; offering unserialised", folder)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def offer(
    cfg: DomainConfig,
    layout: RunLayout,
    job: Job,
    fps: dict[int, str],
    model_dir: Path,
    labels: list[str],
) -> bool:
    """Offer the model ``job``'s run saved in ``model_dir`` (its result already written) as the group's kept
    model; returns whether it was kept. ``model_dir`` is copied, never moved: the caller owns it."""
    from domainbert.cards.finetuned_and_corpus import finetuned_card

    folder = layout.finetuned_model(job.model_name, job.task_name)
    with _group_lock(folder.parent):
        results = current_results(layout, job, fps)
        result = results.get(job.seed)
        if result is None:  # its own result is not current: nothing to keep it by
            return False
        if result.get("collapsed"):  # a collapsed model is never kept, so never offered to push
            logger.info("%s/%s/seed-%d collapsed: its model is not kept", job.model_name, job.task_name, job.seed)
            return False
        held = held_seed(layout, job, fps)
        if held is None or held == job.seed or held not in results or results[held].get("collapsed"):
            keep = True  # nothing current is held, or this seed's own earlier model
        else:
            keep = _rank(job.seed, result) > _rank(held, results[held])
        chosen = job.seed if keep or held is None else held
        selection = {
            "seed": chosen,
            "validation": _rank(chosen, results[chosen])[0],
            "metric": results[chosen]["primary_metric"],
            "seeds_compared": sorted(results),
            "seeds_configured": sorted(fps),
        }
        card = finetuned_card(cfg, results[chosen], labels, custom_code=_custom(model_dir), selection=selection)
        if keep:
            config = {"seed": job.seed, "model": job.model_name, "task": job.task_name, "mode": job.mode}
            with atomic_output(
                folder, config=config, inputs={"run": str(fps[job.seed])}, fp=fps[job.seed], root=layout.root
            ) as tmp:
                shutil.copytree(model_dir, tmp, dirs_exist_ok=True)
                (tmp / CARD).write_text(card)
            logger.info("kept seed %d's model as %s/%s's best (%s)", job.seed, job.model_name, job.task_name, folder)
        else:  # the card names the seeds compared; it is not part of the folder's content hash
            (folder / CARD).write_text(card)
        return keep


def _custom(model_dir: Path) -> bool:
    return (Path(model_dir) / "modeling_mean_pool.py").is_file()


def kept_models(layout: RunLayout, runs: list[ExpectedRun]) -> list[tuple[str, str, int]]:
    """(model, task, seed) of each kept model whose run is one of ``runs`` (what the run expects now), in name
    order: what the report lists. A kept model of another configuration is left out."""
    expected = {(r.model, r.task, r.seed): r.fingerprint for r in runs}
    out = []
    for folder in sorted((layout.root / "finetune").glob("*/*/best")):
        model, task = folder.parent.parent.name, folder.parent.name
        record = read_record(folder) or {}
        seed = (record.get("config") or {}).get("seed")
        if not isinstance(seed, int):
            continue
        fp = expected.get((model, task, seed))
        if fp is not None and fp == record.get("fingerprint"):
            out.append((model, task, seed))
    return out
