"""A rendered report is never replaced by a less complete one.

Rendering again after a result went missing (a seed folder removed, a result gone stale under overrides that
differ from the run's) would put an "Incomplete ... Verdict: withheld" page over a good one. Every report is
therefore rendered into a folder of its own beside ``report/`` (``report-<UTC time>``) and takes the place of
``report/`` only when it uses at least as many fine-tuning results as the one there; otherwise it stays where
it was rendered, and one line says where.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from domainbert.core.artifacts import replace_folder
from domainbert.core.paths import RunLayout

log = logging.getLogger(__name__)


def results_used(seeds: list[int]) -> int:
    """How many fine-tuning results (seeds and floors) a report uses, from its score rows' seed counts."""
    return sum(seeds)


def reported_results(folder: Path) -> int | None:
    """How many fine-tuning results the report rendered in ``folder`` uses; None when there is no readable one."""
    try:
        scores = json.loads((Path(folder) / "results.json").read_text())["scores"]
        return results_used([int(s["n_seeds"]) for s in scores])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def staging_folder(layout: RunLayout) -> Path:
    """Where a report is rendered before it may replace ``report/``."""
    return Path(layout.report).with_name(f"report-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")


def keep_complete(staged: Path, layout: RunLayout, kept: int | None, used: int) -> Path:
    """The folder the report rendered into ``staged`` ends in: ``report/`` unless the one there (using ``kept``
    results) is more complete than this one (``used``), which then stays in ``staged``."""
    final = Path(layout.report)
    if kept is not None and used < kept:
        log.warning(
            "this report uses %d fine-tuning results where %s uses %d (results missing or stale for this "
            "configuration): written beside it to %s, %s left as it was",
            used,
            final,
            kept,
            staged,
            final,
        )
        return staged
    replace_folder(staged, final)
    return final
