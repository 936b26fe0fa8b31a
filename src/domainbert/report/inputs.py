"""Read a run's artifacts for the report: corpus manifest, vocab report, pretraining summaries and metrics,
fine-tuning results. Nothing is retrained here; the one thing recomputed is each fine-tuning run's collapse
verdict, from its stored test predictions (``finetune.collapse.diagnose``), so a run recorded under an older,
laxer rule is judged by today's and never shows as an effect without its mark.

A stage that has not run (its file is absent) reads as ``None`` or empty, so the report can say "not run";
a file that exists but is not valid JSON is a ``DataError`` naming the file and line, because a report
built over a half-read artifact would show figures that are not the run's. This module leaves the meaning
of the fields to ``results.py`` and ``sections.py``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domainbert.core.artifact_types import (
    Artifact,
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
from domainbert.finetune.collapse import diagnose

log = logging.getLogger(__name__)
WARMUP = "base-warmup"  # pretrain/<this> holds the MLM-head warm-up, not an arm


def read_json(path: Path) -> Any | None:
    """The parsed JSON at ``path``, or None when the file does not exist."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg})", file=path, line=exc.lineno) from None


@dataclass
class RunArtifacts:
    """Everything the report reads from one run folder."""

    root: Path
    manifest: dict[str, Any] | None = None
    vocab: dict[str, Any] | None = None
    corpus_plots: list[Path] = field(default_factory=list)
    vocab_plots: list[Path] = field(default_factory=list)
    pretrain: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    finetune: list[dict[str, Any]] = field(default_factory=list)
    base_warmup: dict[str, Any] | None = None  # pretrain/base-warmup/summary.json when the MLM head was warmed up
    result_check: dict[str, Any] = field(default_factory=dict)  # expected results and the missing/stale ones
    input_hashes: dict[str, str] = field(default_factory=dict)

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
    arts.base_warmup = read_json(warm_path)
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


def finetune_results(layout: RunLayout) -> list[tuple[Path, dict[str, Any]]]:
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


def rejudge_collapse(result: dict[str, Any]) -> dict[str, Any]:
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
