"""Read a run's artifacts for the report: corpus manifest, vocab report, pretraining summaries and metrics,
fine-tuning results. Nothing is retrained here; the one thing recomputed is each fine-tuning run's collapse
verdict, from its stored test predictions (``finetune.collapse.diagnose``), so a run recorded under an older,
laxer rule is judged by today's and never shows as an effect without its mark.

A stage that has not run (its file is absent) reads as ``None`` or empty, so the report can say "not run";
a file that exists but is not valid JSON is a ``DataError`` naming the file and line, because a report
built over a half-read artifact would show figures that are not the run's.

``RunArtifacts`` holds the files as read (JSON objects, ``Record``: the file boundary, which the study scripts
read too); the verdict's route reads a fine-tuning result as a frozen ``FinetuneRun`` (``RunArtifacts.runs``,
``FinetuneRun.of``) and the result check as a ``ResultCheck``. This module leaves the meaning of the fields to
``results.py`` and the sections.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domainbert.config.pretrain import split_replicate
from domainbert.core.artifact_types import (
    Artifact,
    BaseWarmupSummary,
    CorpusManifest,
    FinetuneResult,
    PretrainSummary,
    VocabReport,
    load_artifact,
)
from domainbert.core.artifacts import damage, file_hash
from domainbert.core.errors import DataError
from domainbert.core.jsonl import read_records
from domainbert.core.paths import RunLayout
from domainbert.finetune.collapse import chance_score, diagnose

log = logging.getLogger(__name__)
WARMUP = "base-warmup"  # pretrain/<this> holds the MLM-head warm-up, not an arm
Record = dict[str, Any]  # a JSON object as a file holds it: only where a file is read or written


def read_json(path: Path) -> Any | None:
    """The parsed JSON at ``path``, or None when the file does not exist."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg})", file=path, line=exc.lineno) from None


@dataclass(frozen=True)
class SplitOverlap:
    """The examples a task's evaluation splits share with its training split, as fine-tuning recorded them:
    per split (``validation``, ``test``) the normalised and the verbatim (``exact``) matches."""

    normalised: Mapping[str, int]
    exact: Mapping[str, int]
    excluded: bool


@dataclass(frozen=True)
class Window:
    """How many test examples the encoder's window left partly unread, and the window (``cut_by_window``)."""

    test: int
    max_length: int
    chunks: int


@dataclass(frozen=True)
class FinetuneRun:
    """One fine-tuning result as the report reads it (``result.json``, or a study's score-file row): a replicate's
    run (``continued@r2``) is its arm's (``model``), marked with its ``replicate``. The test answers (``gold``,
    ``pred``, or a score file's ``counts``) travel with it for the statistics; every reader uses the fields."""

    model: str
    task: str
    seed: int
    replicate: int
    task_type: str | None
    primary_metric: str | None
    scores: Mapping[str, float]  # the test scores (numbers only)
    collapsed: bool
    retried: bool
    multi_label: bool = False
    train_seconds: float | None = None
    lr: float | None = None
    steps: int | None = None
    stopped_early: bool = False
    train_examples: int | None = None
    test_examples: int | None = None
    window: Window | None = None
    split_overlap: SplitOverlap | None = None
    gold: Sequence[Any] | None = field(default=None, repr=False, compare=False)
    pred: Sequence[Any] = field(default=(), repr=False, compare=False)
    counts: Sequence[Sequence[float]] | None = field(default=None, repr=False, compare=False)
    test_set: str | None = None
    # the kept (best) validation evaluation was the last of two or more: the run's validation was still rising
    # when its budget ended (None: the result kept no history)
    kept_last: bool | None = None

    @property
    def chance(self) -> float | None:
        """The test score of the best constant answer (``collapse.chance_score``), None where none stands."""
        if self.gold is None or self.task_type is None or self.primary_metric is None:
            return None
        return chance_score(self.task_type, list(self.gold), self.primary_metric, self.multi_label)

    @staticmethod
    def marked(result: Mapping[str, Any]) -> Record:
        """A result's JSON object with a replicate's model (``continued@r2``) as its arm's, marked ``replicate``."""
        model, replicate = split_replicate(result["model"])
        return {**result, "model": model, "replicate": replicate} if replicate > 1 else dict(result)

    @classmethod
    def of(cls, result: Mapping[str, Any] | FinetuneRun) -> FinetuneRun:
        """The run of a result's JSON object (a ``FinetuneRun`` stays as it is)."""
        if isinstance(result, FinetuneRun):
            return result
        record = cls.marked(result)
        examples = record.get("num_examples") or {}
        cut = record.get("cut_by_window") or {}
        overlap = record.get("split_overlap")
        seconds, lr, steps = record.get("train_seconds"), record.get("lr"), record.get("steps")
        return cls(
            model=record["model"],
            task=record["task"],
            seed=int(record["seed"]),
            replicate=int(record.get("replicate") or 1),
            task_type=record.get("task_type"),
            primary_metric=record.get("primary_metric"),
            scores={k: float(v) for k, v in (record.get("test") or {}).items() if isinstance(v, int | float)},
            collapsed=bool(record.get("collapsed")),
            retried=bool(record.get("retry")),
            multi_label=bool(record.get("multi_label")),
            train_seconds=float(seconds) if seconds is not None else None,
            lr=float(lr) if lr else None,
            steps=int(steps) if steps else None,
            stopped_early=bool(record.get("stopped_early")),
            train_examples=examples.get("train"),
            test_examples=examples.get("test"),
            window=Window(int(cut["test"]), int(cut["max_length"]), int(cut["chunks"]))
            if cut.get("test") is not None
            else None,
            split_overlap=_overlap(overlap) if overlap else None,
            gold=record.get("gold"),
            pred=list(record.get("pred") or []),
            counts=record.get("counts"),
            test_set=record.get("test_set"),
            kept_last=_kept_last(record),
        )


def _kept_last(record: Mapping[str, Any]) -> bool | None:
    history = record.get("history") or []
    if len(history) < 2 or record.get("best_step") is None:
        return None
    return int(record["best_step"]) == int(history[-1]["step"])


def _overlap(record: Mapping[str, Any]) -> SplitOverlap:
    splits = [s for s in ("validation", "test") if isinstance(record.get(s), Mapping)]
    return SplitOverlap(
        normalised={s: int(record[s].get("normalised") or 0) for s in splits},
        exact={s: int(record[s].get("exact") or 0) for s in splits},
        excluded=bool(record.get("excluded")),
    )


@dataclass(frozen=True)
class ResultCheck:
    """The results the config expects (``expected``) and, by ``model/task/seed-n``, those missing, stale, damaged,
    used without a record beside them (``unrecorded``) or left out as not part of the config (``other``)."""

    expected: int
    missing: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    damaged: tuple[str, ...] = ()
    unrecorded: tuple[str, ...] = ()
    other: tuple[str, ...] = ()

    def to_json(self) -> Record:
        """The check as the report's fingerprint keys it."""
        return {
            "expected": self.expected,
            "missing": list(self.missing),
            "stale": list(self.stale),
            "unrecorded": list(self.unrecorded),
            "not in this config": list(self.other),
            "damaged": list(self.damaged),
        }


@dataclass
class RunArtifacts:
    """Everything the report reads from one run folder."""

    root: Path
    manifest: Record | None = None
    vocab: Record | None = None
    corpus_plots: list[Path] = field(default_factory=list)
    vocab_plots: list[Path] = field(default_factory=list)
    pretrain: dict[str, Record] = field(default_factory=dict)
    metrics: dict[str, list[Record]] = field(default_factory=dict)
    finetune: list[Record] = field(default_factory=list)
    base_warmup: Record | None = None  # pretrain/base-warmup/summary.json when the MLM head was warmed up
    result_check: ResultCheck | None = None  # None: the results were not checked against a config
    input_hashes: dict[str, str] = field(default_factory=dict)

    @property
    def runs(self) -> list[FinetuneRun]:
        """The fine-tuning results as typed runs, in the order read."""
        return [FinetuneRun.of(r) for r in self.finetune]

    @property
    def holds_nothing(self) -> bool:
        """No stage's output is here (an empty folder, or not a run folder): a page over it would be empty."""
        return self.manifest is None and self.vocab is None and not self.pretrain and not self.finetune


def _is_final(folder: Path) -> bool:
    # atomic_output writes to "<name>.tmp-<pid>" and renames; such a folder is not a finished artifact.
    return ".tmp-" not in folder.name and ".old-" not in folder.name


def _note(arts: RunArtifacts, path: Path) -> None:
    # The report's fingerprint covers every file it read, so a changed result re-renders it.
    if path.is_file():
        arts.input_hashes[path.relative_to(arts.root).as_posix()] = file_hash(path)


def _stage_json_and_plots(arts: RunArtifacts, folder: Path, name: str, kind: type[Artifact]) -> tuple[Any, list[Path]]:
    """A stage's JSON artifact (checked as ``kind``) and, when it exists, the PNG plots beside it (all noted as
    inputs)."""
    path = folder / name
    data = load_artifact(kind, path)
    _note(arts, path)
    plots = sorted(folder.glob("*.png")) if data is not None else []
    for plot in plots:
        _note(arts, plot)
    return data, plots


def load_run(layout: RunLayout, arms: list[str] | None = None) -> RunArtifacts:
    """Read every artifact of the run under ``layout`` that exists.

    Args:
        layout: the run's folders.
        arms: pretraining arms to look for; by default every folder under ``<run>/pretrain``.

    Returns:
        The artifacts; stages that have not run are None or empty.

    Raises:
        DataError: an artifact file exists but is not valid JSON or does not fit its type (``artifact_types``).
    """
    arts = RunArtifacts(root=layout.root)
    arts.manifest, arts.corpus_plots = _stage_json_and_plots(arts, layout.corpus, "manifest.json", CorpusManifest)
    arts.vocab, arts.vocab_plots = _stage_json_and_plots(arts, layout.vocab, "report.json", VocabReport)

    pretrain_root = layout.root / "pretrain"
    if arms is None:
        arms = sorted(p.name for p in pretrain_root.glob("*") if p.is_dir() and _is_final(p) and p.name != WARMUP)
    warm_path = pretrain_root / WARMUP / "summary.json"
    arts.base_warmup = load_artifact(BaseWarmupSummary, warm_path)
    _note(arts, warm_path)
    for arm in arms:
        summary_path = layout.pretrain(arm) / "summary.json"
        summary = load_artifact(PretrainSummary, summary_path)
        if summary is None:
            continue
        arts.pretrain[arm] = summary
        _note(arts, summary_path)
        metrics_path = layout.pretrain(arm) / "metrics.jsonl"
        arts.metrics[arm] = read_records(metrics_path)
        _note(arts, metrics_path)

    for path, result in finetune_results(layout):
        arts.finetune.append(result)
        _note(arts, path)
    log.info(
        "report inputs: corpus=%s vocab=%s arms=%s finetune results=%d",
        arts.manifest is not None,
        arts.vocab is not None,
        sorted(arts.pretrain),
        len(arts.finetune),
    )
    return arts


def finetune_results(layout: RunLayout) -> list[tuple[Path, Record]]:
    """Every complete, undamaged fine-tuning result of the run with its path, collapse judged by today's rule."""
    out = []
    for path in sorted((layout.root / "finetune").glob("*/*/seed-*/result.json")):
        if not _is_final(path.parent) or damage(path.parent) is not None:
            continue  # a damaged result is never read: checked_run lists it (expectations.result_state)
        result = load_artifact(FinetuneResult, path)
        if result is None:  # removed since the glob
            continue
        out.append((path, rejudge_collapse(result)))
    return out


def rejudge_collapse(result: Record) -> Record:
    """``result`` with its test collapse diagnosed again from its predictions under the current rule; a run the
    stage marked collapsed stays collapsed (a retried run's first attempt is not in its predictions)."""
    stored = result.get("collapse") or {}
    verdict = diagnose(
        result["task_type"],
        result["gold"],
        result["pred"],
        stored.get("loss_start"),
        stored.get("loss_end"),
        multi_label=bool(result.get("multi_label")),
    )
    if result.get("collapsed") and not verdict["collapsed"]:
        verdict = {**verdict, "collapsed": True, "reasons": list(stored.get("reasons") or ["marked by the stage"])}
    return {**result, "collapse": verdict, "collapsed": bool(verdict["collapsed"])}
