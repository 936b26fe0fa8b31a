"""The report's typed rows: a model's scores on a task (``ScoreRow``) and a comparison of two models on a task
(``Comparison``, with its ``Design``, ``model_comparison``'s, and its family-wise part, ``FamilyWise``), and Holm's correction over a
page's comparisons (``holm_adjusted``).

``results.build_tables`` builds the rows once from the loaded results; every section, sentence and figure reads
their fields. The rows are frozen: ``holm_adjusted`` returns new comparisons (``dataclasses.replace``), each with
its ``FamilyWise`` part, and leaves the interval's own reading (``Comparison.unadjusted``) as it was, so a larger
family (the cross-domain page) starts again from it. ``to_json`` and ``*_from_json`` are the one place the rows
meet JSON (``results.json``, a benchmark's files). What Holm's correction is and the interval its verdict uses are
``power.py``'s (``holm``, ``detectable_difference``); the draws themselves are ``stats.py``'s. No sentence is
written here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np
from scipy import stats

from domainbert.report.draws import Difference, bounds
from domainbert.report.model_comparison import DESIGN_FIELDS, Design
from domainbert.report.power import NO_DIFFERENCE, detectable_difference, detectable_range, holm

NOT_COMPARED = "not compared"
JsonObject = dict[str, Any]  # a row as results.json holds it: only where the file is written or read


@dataclass(frozen=True)
class ScoreRow:
    """One model's test scores on one task over its runs (fractions: F1 0.853, not 85.3)."""

    task: str
    task_type: str | None
    metric: str
    model: str
    seeds: tuple[int, ...]
    n_seeds: int
    replicates: int
    values: tuple[float, ...]
    mean: float
    std: float
    collapsed: int
    retried: int
    train_seconds: float | None
    domain: str | None = None  # the run's domain on the cross-domain page


@dataclass(frozen=True)
class FamilyWise:
    """A comparison's part of Holm's correction over its page: ``p_holm`` over ``comparisons`` rows, whether the
    claim survives, the interval at the level the verdict uses (``level``; None where no p-value was drawn) and
    the smallest difference the design detects with 80% power at Holm's first threshold."""

    comparisons: int
    p_holm: float | None
    significant: bool
    level: float | None = None
    low: float | None = None
    high: float | None = None
    detectable: float | None = None
    detectable_range: tuple[float, float] | None = None  # given the run's own spread (power.detectable_range)


@dataclass(frozen=True)
class Comparison:
    """``model`` against ``reference`` on ``task``: the difference of their means (``diff``, None when the two
    could not be compared, ``reason`` says why), its unadjusted interval and p-value, how it was drawn, the
    interval's own reading (``unadjusted``) and, once Holm's correction ran over the page, its ``family``."""

    task: str
    metric: str
    model: str
    reference: str
    confidence: float
    collapsed: Mapping[str, int]  # model -> collapsed runs, for the models that have any
    runs: Mapping[str, int]
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    n_seeds: int
    p_value: float | None
    unadjusted: str
    runs_text: str | None = None
    resampled: str | None = None
    design: Design | None = None
    reason: str | None = None
    family: FamilyWise | None = None
    domain: str | None = None
    draws: np.ndarray | Difference | None = field(default=None, repr=False, compare=False)  # never written to disk

    @property
    def verdict(self) -> str:
        """ "better", "worse" or "no significant difference": the family-wise reading once Holm's correction ran
        (a claim only where it survives), else the interval's; "not compared" without a difference."""
        if self.family is None or self.family.level is None:
            return self.unadjusted
        centre = self.centre
        return ("better" if centre > 0 else "worse") if self.family.significant else NO_DIFFERENCE

    @property
    def centre(self) -> float:
        if self.diff is not None:
            return self.diff
        assert self.ci_low is not None and self.ci_high is not None
        return (self.ci_low + self.ci_high) / 2

    @property
    def comparisons(self) -> int:
        """The page's comparisons with a p-value (1 before Holm's correction)."""
        return self.family.comparisons if self.family is not None else 1

    @property
    def p_holm(self) -> float | None:
        return self.family.p_holm if self.family is not None else None

    @property
    def detectable(self) -> float | None:
        return self.family.detectable if self.family is not None else None

    @property
    def paired(self) -> bool:
        return bool(self.design and self.design.paired)

    @property
    def se(self) -> float | None:
        return self.design.se if self.design is not None else None

    @property
    def df(self) -> float | None:
        return self.design.df if self.design is not None else None


def unadjusted_verdict(ci_low: float, ci_high: float) -> str:
    """The interval's reading: "better" / "worse" when it excludes 0, else "no significant difference"."""
    if ci_low > 0:
        return "better"
    if ci_high < 0:
        return "worse"
    return NO_DIFFERENCE


def row_se(row: Comparison) -> float:
    """The row's se; for a compare function that gives none, the one its interval implies (normal)."""
    if row.se is not None:
        return float(row.se)
    assert row.ci_low is not None and row.ci_high is not None
    return float((row.ci_high - row.ci_low) / (2 * NormalDist().inv_cdf(0.5 + row.confidence / 2)))


def _family_interval(row: Comparison, level: float) -> tuple[float, float]:
    """The interval at ``1 - level``: from the row's draws where it has them, else its se and df (t)."""
    if row.draws is not None and len(row.draws):
        return bounds(row.draws, level)
    se, df = row_se(row), row.df
    q = float(stats.t.ppf(1 - level / 2, df)) if df and not math.isinf(df) else NormalDist().inv_cdf(1 - level / 2)
    return row.centre - q * se, row.centre + q * se


def holm_adjusted(rows: Sequence[Comparison], confidence: float) -> list[Comparison]:
    """``rows`` with their ``FamilyWise`` part over all of them (Holm's ``p_holm``, whether the claim survives, the
    interval the verdict uses and the detectable difference), as new rows in the same order; the interval's own
    reading stays ``unadjusted``."""
    alpha = 1 - confidence
    adjusted = holm([r.p_value for r in rows])
    family = sum(p is not None for p in adjusted)
    ranked = sorted((r.p_value, i) for i, r in enumerate(rows) if r.p_value is not None)
    step = {i: alpha / (family - rank) for rank, (_, i) in enumerate(ranked)}  # Holm's threshold for each row
    out = []
    for index, (row, p) in enumerate(zip(rows, adjusted, strict=True)):
        if p is None or row.ci_low is None or row.p_value is None:
            out.append(replace(row, family=FamilyWise(family, p, False)))
            continue
        # Holm's threshold for the row, or less where the step-down stopped before it (then p_holm caps at a
        # value that makes the interval include 0): either way it excludes 0 exactly when the verdict is a claim
        level = min(alpha * row.p_value / p, step[index]) if p > 0 else step[index]
        low, high = _family_interval(row, level)
        detectable = detectable_difference(row_se(row), row.df, alpha, family)
        spread = detectable_range(row_se(row), row.df, alpha, family)
        # Holm: reject while p <= alpha / (m - rank)
        out.append(replace(row, family=FamilyWise(family, p, p <= alpha, 1 - level, low, high, detectable, spread)))
    return out


def score_json(row: ScoreRow) -> JsonObject:
    """A score row as ``results.json`` holds it."""
    out: JsonObject = {k: getattr(row, k) for k in ScoreRow.__dataclass_fields__ if k != "domain"}
    out["seeds"], out["values"] = list(row.seeds), list(row.values)
    return out if row.domain is None else {**out, "domain": row.domain}


def comparison_json(row: Comparison) -> JsonObject:
    """A comparison as ``results.json`` holds it (its draws left out), in the order the page's readers know."""
    out: JsonObject = {
        "task": row.task,
        "metric": row.metric,
        "model": row.model,
        "reference": row.reference,
        "confidence": row.confidence,
        "collapsed": dict(row.collapsed),
        "runs": dict(row.runs),
        "diff": row.diff,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "n_seeds": row.n_seeds,
        "p_value": row.p_value,
    }
    if row.diff is None:
        out |= {"verdict": row.verdict, "reason": row.reason}
    else:
        design = row.design or Design()
        out |= {"runs_text": row.runs_text, "resampled": row.resampled}
        out |= {k: getattr(design, k) for k in DESIGN_FIELDS}
        out["replicates"] = dict(design.replicates) if design.replicates is not None else None
        out["verdict"] = row.verdict
    fw = row.family
    if fw is not None:
        out |= {"comparisons": fw.comparisons, "p_holm": fw.p_holm, "verdict_unadjusted": row.unadjusted}
        out["holm_significant"] = fw.significant
        if fw.level is not None:
            out |= {"fw_level": fw.level, "fw_low": fw.low, "fw_high": fw.high}
        out["detectable"] = fw.detectable
    return out if row.domain is None else {**out, "domain": row.domain}


def tables_json(scores: Sequence[ScoreRow], comparisons: Sequence[Comparison]) -> JsonObject:
    """``results.json``: the score rows and the comparisons."""
    return {"scores": [score_json(r) for r in scores], "comparisons": [comparison_json(c) for c in comparisons]}


# What Holm's correction adds to a comparison's JSON (``comparison_json``), and the verdict it changes.
FAMILY_KEYS = (
    "comparisons",
    "p_holm",
    "verdict_unadjusted",
    "holm_significant",
    "fw_level",
    "fw_low",
    "fw_high",
    "detectable",
    "verdict",
)


def score_from_json(row: Mapping[str, Any]) -> ScoreRow:
    """A score row from ``results.json`` (``score_json``)."""
    return ScoreRow(
        task=row["task"],
        task_type=row.get("task_type"),
        metric=row["metric"],
        model=row["model"],
        seeds=tuple(row.get("seeds") or ()),
        n_seeds=int(row["n_seeds"]),
        replicates=int(row.get("replicates") or 1),
        values=tuple(row.get("values") or ()),
        mean=float(row["mean"]),
        std=float(row["std"]),
        collapsed=int(row.get("collapsed") or 0),
        retried=int(row.get("retried") or 0),
        train_seconds=row.get("train_seconds"),
        domain=row.get("domain"),
    )


def comparison_from_json(row: Mapping[str, Any], confidence: float) -> Comparison:
    """A comparison from what a file kept of it (``comparison_json``, or a benchmark's subset of its keys), before
    Holm's correction: its family-wise part is left to ``holm_adjusted`` over the new family."""
    diff, low, high = row.get("diff"), row.get("ci_low"), row.get("ci_high")
    # the reading it had (a page's family-wise verdict where a file kept no other), else its interval's
    kept = row.get("verdict_unadjusted") or row.get("verdict")
    reading = str(kept) if kept else unadjusted_verdict(low, high) if low is not None and high is not None else ""
    reading = reading or NOT_COMPARED
    design = Design(**{k: row[k] for k in DESIGN_FIELDS if k in row})
    return Comparison(
        task=row["task"],
        metric=row.get("metric", ""),
        model=row["model"],
        reference=row["reference"],
        confidence=float(row.get("confidence", confidence)),
        collapsed=dict(row.get("collapsed") or {}),
        runs=dict(row.get("runs") or {}),
        diff=diff,
        ci_low=low,
        ci_high=high,
        n_seeds=int(row.get("n_seeds") or 0),
        p_value=row.get("p_value"),
        unadjusted=reading,
        runs_text=row.get("runs_text"),
        resampled=row.get("resampled"),
        design=design,
        reason=row.get("reason"),
        domain=row.get("domain"),
    )
