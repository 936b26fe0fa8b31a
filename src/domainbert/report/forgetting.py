"""The forgetting line of the headline: each arm's change on the domain's tasks beside its change on general English.

A domain-adaptive arm can gain on its domain and lose elsewhere. ``finetune.forgetting_task`` fine-tunes every
model on a general-English task too (role ``general``); its comparisons are ordinary rows of the page, paired
under the same seeds and corrected by Holm with the others. This module only words them, one line per arm (``Forgetting, `` before it on the page),
each difference from the task's better reference: ``continued: +2.1 on science-subject against base (significant);
-1.3 on general English (general-lexname) against base (not significant); paired, after Holm.`` It decides nothing
statistical and leaves the domain verdict (``verdict``, ``references``) to its modules.
"""

from __future__ import annotations

from collections.abc import Collection

from domainbert.report.results import best_reference
from domainbert.report.rows import Comparison, ScoreRow
from domainbert.report.summary import signed_points
from domainbert.report.verdict import comparison_of

READING = {"better": "significant", "worse": "significant", "no significant difference": "not significant"}


def _against_reference(
    scores: list[ScoreRow], comparisons: list[Comparison], arm: str, task: str
) -> Comparison | None:
    ref = best_reference(scores, task)
    return comparison_of(comparisons, task, arm, ref) if ref and ref != arm else None


def _part(row: Comparison, where: str) -> str:
    # each task names its own reference: the better reference can differ between tasks
    return f"{signed_points(row.diff)} on {where} against {row.reference} ({READING.get(row.verdict, row.verdict)})"


def forgetting_lines(
    scores: list[ScoreRow], comparisons: list[Comparison], arms: list[str], general: Collection[str]
) -> list[str]:
    """One line per arm with a comparison on a ``general`` task: its paired difference from the better reference
    on each domain task, then on each general task, each read after Holm's correction over the page."""
    tasks = list(dict.fromkeys(r.task for r in scores))
    out = []
    for arm in arms:
        rows = [(t, row) for t in tasks if (row := _against_reference(scores, comparisons, arm, t))]
        on_general = [_part(row, f"general English ({t})") for t, row in rows if t in general]
        if not on_general:
            continue
        on_domain = [_part(row, t) for t, row in rows if t not in general] or ["no comparison on the domain's tasks"]
        out.append(f"{arm}: {', '.join(on_domain)}; {', '.join(on_general)}; paired, after Holm.")
    return out


def forgetting_paragraph(
    scores: list[ScoreRow], comparisons: list[Comparison], arms: list[str], general: Collection[str]
) -> list[str]:
    """The headline's forgetting lines, each named as such; empty without a general task's comparison."""
    return [f"Forgetting, {line}" for line in forgetting_lines(scores, comparisons, arms, general)]
