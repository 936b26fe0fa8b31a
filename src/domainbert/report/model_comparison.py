"""What ``stats.compare_models`` answers for two models on one task, as typed objects: each side's mean and
spread (``MeanStd``), the seeds each side ran (``SeedTable``), how the difference was drawn (``Design``, the part a
result file keeps, and ``DrawDesign``) and
the comparison itself (``ModelComparison``) with its interval, p-value and how sure those figures are.

``ModelComparison.record`` gives the JSON form a study script prints (``studies/rescore.py --pair``); nothing on
the route to the page reads that form.

It leaves out the statistics that fill these objects (``stats.py``, ``paired.py``, ``draws.py``), Holm's
correction over a page and the page's rows (``rows.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from domainbert.report.draws import Difference, Interval


@dataclass(frozen=True)
class MeanStd:
    """Mean and sample standard deviation (ddof=1; 0.0 for one value) of ``n`` values."""

    mean: float
    std: float
    n: int


def mean_std(values: Sequence[float] | np.ndarray) -> MeanStd:
    """``MeanStd`` of ``values``.

    Raises:
        ValueError: no values.
    """
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError("mean_std of no values")
    return MeanStd(float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0, int(arr.size))


@dataclass(frozen=True)
class SeedTable:
    """The seeds of a comparison: either side's (``seeds``), each side's, and per seed (seed, A's score or None,
    B's); with replicates, a seed's score is its mean over the side's replicates."""

    seeds: tuple[int, ...]
    seeds_a: tuple[int, ...]
    seeds_b: tuple[int, ...]
    per_seed: tuple[tuple[int, float | None, float | None], ...]


def seed_table(seeds_a: Sequence[int], seeds_b: Sequence[int], full_a: np.ndarray, full_b: np.ndarray) -> SeedTable:
    """The ``SeedTable`` of two sides' runs (``seeds_*``: each run's seed, in the order of ``full_*``, its score)."""

    def by_seed(seeds: Sequence[int], full: np.ndarray) -> dict[int, float]:
        return {s: float(np.mean([v for t, v in zip(seeds, full, strict=True) if t == s])) for s in set(seeds)}

    score_a, score_b = by_seed(seeds_a, full_a), by_seed(seeds_b, full_b)
    seeds = sorted(set(seeds_a) | set(seeds_b))
    return SeedTable(
        seeds=tuple(seeds),
        seeds_a=tuple(sorted(set(seeds_a))),
        seeds_b=tuple(sorted(set(seeds_b))),
        per_seed=tuple((s, score_a.get(s), score_b.get(s)) for s in seeds),
    )


@dataclass(frozen=True)
class Design:
    """How a comparison was drawn (``stats.compare_models``), as a result file keeps it: its pairing, its units, and the ``se`` and ``df`` of
    its draws, the figures ``power.detectable_difference`` uses. Any field a compare function leaves out is None."""

    paired: bool | None = None
    pairing: str | None = None  # "seed", "replicate", "two-way"; None: unpaired
    units: int | None = None
    seed_correlation: float | None = None
    replicates: Mapping[str, int] | None = None  # {"a": ..., "b": ...}
    se: float | None = None
    df: float | None = None
    n_samples: int | None = None
    unit_sd: float | None = None
    n_examples: int | None = None
    p_counted: bool | None = None  # the p-value a count of draws (no seed term); False: the t integrated


DESIGN_FIELDS = tuple(Design.__dataclass_fields__)


@dataclass(frozen=True)
class DrawDesign(Design):
    """A ``Design`` as ``stats.compare_models`` drew it, with what the page's method line reads: the seed term's
    spread per side and its df, the method in words and what was resampled. A file keeps the ``Design`` alone."""

    seed_sd: Mapping[str, float | None] = field(default_factory=dict)
    seed_df: float | None = None
    method: str = ""
    resampled: str = ""


@dataclass(frozen=True)
class ModelComparison(Interval):
    """``model_a`` against ``model_b`` on ``task``: the ``Interval`` of A's mean minus B's (``diff``, the
    unadjusted ``low`` and ``high``, the two-sided ``p_value``, the reading ``verdict``: "<model> better" or no
    significant difference), and how sure its figures are: ``p_counted`` (a count of draws, no seed term),
    ``p_exact`` (the t's own p, no example term), and the Monte Carlo standard errors of the p-value and bounds.
    ``draws`` is the distribution itself (never written to disk)."""

    model_a: str
    model_b: str
    task: str
    metric: str
    n_examples: int
    a: MeanStd  # of the per-run test metric
    b: MeanStd
    seeds: SeedTable
    design: DrawDesign  # with the draws made (``n_samples``) and whether the p-value counts them (``p_counted``)
    p_exact: bool
    p_error: float
    bounds_error: float
    draws: Difference = field(repr=False, compare=False)

    @property
    def n_samples(self) -> int:
        """The draws made."""
        return int(self.design.n_samples or 0)

    @property
    def p_counted(self) -> bool:
        """The p-value is a count of draws (no seed term), not the t integrated."""
        return bool(self.design.p_counted)

    @property
    def n_seeds(self) -> int:
        """Runs on the smaller side (a floor is one deterministic run; the sides' seeds need not match)."""
        return min(self.a.n, self.b.n)

    @property
    def runs_text(self) -> str:
        return f"{self.a.n} v {self.b.n}"

    def record(self) -> dict[str, Any]:
        """The comparison as one flat JSON object (the design's and the seed table's fields at the top level),
        without the draws."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("seeds", "design", "draws")}
        out["a"], out["b"] = asdict(self.a), asdict(self.b)
        return {**out, **asdict(self.seeds), **asdict(self.design)}
