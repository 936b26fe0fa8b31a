"""Score files: a run's fine-tuning results reduced to what every table of a study is computed from, small enough
to commit (under ``studies/scores/``), so that a clone can recheck each figure of a study file without the models.

One gzipped JSON per study point: per run its ``model``, ``task``, ``task_type``, ``primary_metric``, ``seed``,
``replicate``, ``collapsed``, the test score, and ``counts``, the per-example count matrix of its test predictions
(``finetune.counts``: true positives, predicted and gold entities per NER sentence; per-label counts for
classification, labels sorted), under the task's ``test_set`` hash (of its gold answers). ``report.stats`` takes
such runs as it takes ``result.json`` dicts: every interval and p-value is the same, to the last digit, as from
the predictions themselves (``tests/unit/studies/test_score_files.py``). Predictions and texts are left out.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from domainbert.core.errors import DataError
from domainbert.finetune.counts import count_metric
from domainbert.report.paired import replicate_of

FORMAT = 1
KEPT = ("model", "task", "task_type", "primary_metric", "seed", "multi_label", "collapsed")


def test_set_hash(gold: list[Any]) -> str:
    return hashlib.sha256(json.dumps(gold, sort_keys=True).encode()).hexdigest()[:16]


def score_rows(results: list[dict[str, Any]], made: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Each result as a score-file row (labels of a classification task: those of all its runs, sorted); ``made``,
    one per result, is when and at which commit each run finished (``made``: ``revision``, ``finished_at``), so
    that the order of a study's preregistration and its runs can be checked from the file."""
    labels: dict[str, list[str]] = {}
    for r in results:
        if r["task_type"] != "ner":
            multi = bool(r.get("multi_label"))
            seen = {x for rows in (r["gold"], r["pred"]) for row in rows for x in (row if multi else [row])}
            labels[r["task"]] = sorted(set(labels.get(r["task"], [])) | seen)
    rows = []
    for i, r in enumerate(results):
        metric = r.get("primary_metric") or ("f1" if r["task_type"] == "ner" else "macro_f1")
        counts, _ = count_metric(
            r["task_type"], metric, r["gold"], r["pred"], labels.get(r["task"]), bool(r.get("multi_label"))
        )
        rows.append(
            {
                **{k: r.get(k) for k in KEPT},
                "primary_metric": metric,
                "replicate": replicate_of(r),
                "test": {metric: r["test"][metric]} if "test" in r else None,
                "test_set": test_set_hash(r["gold"]),
                "counts": np.asarray(counts).astype(int).tolist(),
                **({"made": made[i]} if made is not None else {}),
            }
        )
    return rows


def write_scores(
    results: list[dict[str, Any]], path: Path, about: dict[str, Any], made: list[dict[str, Any]] | None = None
) -> Path:
    """Write ``results`` as a score file at ``path`` (``.json.gz``), with ``about`` (what the study point was) and
    each run's ``made`` (commit and finishing time, see ``score_rows``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"format": FORMAT, "about": about, "runs": score_rows(results, made)}, separators=(",", ":"))
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write(body)
    tmp.replace(path)
    return path


def read_scores(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(about, runs)`` of a score file; a file that is not one is a ``DataError`` naming it."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, ValueError) as exc:
        raise DataError(f"not a score file ({exc})", file=path) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("runs"), list):
        raise DataError(f"not a score file of format {FORMAT}", file=path)
    return data.get("about", {}), data["runs"]
