"""Paired comparisons: two models fine-tuned under the same seeds (and pretraining replicates) compared cell by cell.

A fine-tuning seed fixes the head's initialisation, the data order and the dropout masks for every model
(``finetune.runner``, ``finetune.trainer``), and the seed moves every model's score together (r = 0.97-1.00
across the demo's arms). So the comparison is made on the per-cell differences ``g = A - B`` of runs that share
a seed, as the Multi-Bootstrap of MultiBERTs does (Sellam et al., ICLR 2022): pretraining replicates, seeds as
pairs and test examples are all sources of the difference's variance, and each draw carries all three.

``pairing`` finds the cells, at one of three levels:

* ``seed``: each side is one checkpoint; units are the common seeds, ``se^2 = var(g_s) / S`` on ``S - 1`` df.
* ``replicate``: both sides have two or more pretraining replicates (``pretrain.replicates``); replicate ``r`` of
  A is paired with replicate ``r`` of B and the seeds nest inside: units are replicates, each the mean of its
  seeds' differences, ``se^2 = var(g_r) / R`` on ``R - 1`` df (exact whatever the replicate and seed variances).
* ``two-way``: one side has replicates, the other is one checkpoint (an arm against ``base``): the
  ``R x S`` differences ``g_rs = A_rs - B_s`` carry A's replicate effect on rows and B's own seed noise on
  columns; ``se^2 = (MS_rows + MS_cols - MS_error) / RS`` (two-way ANOVA without interaction) with
  Satterthwaite's df (at least 1), or the larger of the rows' and the columns' terms on its own df where the
  estimate falls under it.

Each draw is the example bootstrap of the mean difference (all runs on the same drawn test examples), shrunk by
the part of its variance that per-example prediction flips make (already in the units' variance; never more
than the units' variance holds, so the draws never vary less than test sampling alone makes them), plus
``se x t(df)``: the Multi-Bootstrap's resampling of units, taken as Student-t because a resample of 3-5 units
holds (k - 1) / k of their variance and a handful of distinct values. The t is integrated exactly for each
example draw (``draws.Difference``), not drawn: where the flips make all of the example term's variance the
p-value is the t-test's. A floor (one deterministic run) is not
paired: ``report.stats`` compares it unpaired. This module reads no file and renders nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from domainbert.report.draws import Difference, Scores
from domainbert.report.inputs import FinetuneRun, Record


def replicate_of(result: FinetuneRun | Record) -> int:
    """The pretraining replicate a result's model came from (1 for a model without replicates); a result's JSON
    object (a study's score-file row) as its ``replicate`` field says."""
    if isinstance(result, FinetuneRun):
        return result.replicate
    return int(result.get("replicate") or 1)


@dataclass(frozen=True)
class Pairing:
    """The cells of a paired comparison: ``level``; ``rows`` (replicates, or ``[1]``) and ``seeds`` (columns);
    ``a`` and ``b``: for each (row, seed) cell, the index of its run in ``runs_a`` / ``runs_b``."""

    level: str
    rows: list[int]
    seeds: list[int]
    a: dict[tuple[int, int], int]
    b: dict[tuple[int, int], int]

    @property
    def units(self) -> int:
        return len(self.rows) if self.level == "replicate" else len(self.seeds)

    @property
    def cells(self) -> int:
        return len(self.rows) * len(self.seeds)


def _cells(runs: Sequence[FinetuneRun | Record]) -> dict[tuple[int, int], int]:
    return {(replicate_of(r), r.seed if isinstance(r, FinetuneRun) else int(r["seed"])): i for i, r in enumerate(runs)}


def pairing(runs_a: Sequence[FinetuneRun | Record], runs_b: Sequence[FinetuneRun | Record]) -> Pairing | None:
    """The paired design of two models' runs; None when it cannot be paired (a side with one run, or fewer than
    two seeds in common). Runs outside the common cells are left out of the pairing."""
    cells_a, cells_b = _cells(runs_a), _cells(runs_b)
    reps_a, reps_b = sorted({r for r, _ in cells_a}), sorted({r for r, _ in cells_b})
    if len(reps_a) >= 2 and len(reps_b) >= 2:
        rows = [r for r in reps_a if r in reps_b]
        seeds = _seeds_in_all(rows, cells_a, cells_b, lambda r: r)
        level = "replicate"
        if len(rows) < 2:
            return None
    elif len(reps_a) >= 2 or len(reps_b) >= 2:
        rows = reps_a if len(reps_a) >= 2 else reps_b
        single = reps_b[0] if len(reps_a) >= 2 else reps_a[0]
        seeds = _seeds_in_all(rows, cells_a, cells_b, lambda r: single, replicated_a=len(reps_a) >= 2)
        level = "two-way"
    else:
        rows = [reps_a[0]] if reps_a == reps_b else []
        if not rows:
            return None
        seeds = _seeds_in_all(rows, cells_a, cells_b, lambda r: r)
        level = "seed"
    if len(seeds) < 2:
        return None
    a: dict[tuple[int, int], int] = {}
    b: dict[tuple[int, int], int] = {}
    for r in rows:
        for s in seeds:
            a[(r, s)] = cells_a[(r, s)] if (r, s) in cells_a else cells_a[(reps_a[0], s)]
            b[(r, s)] = cells_b[(r, s)] if (r, s) in cells_b else cells_b[(reps_b[0], s)]
    return Pairing(level, rows, seeds, a, b)


def _seeds_in_all(
    rows: list[int],
    cells_a: dict[tuple[int, int], int],
    cells_b: dict[tuple[int, int], int],
    other_row: Callable[[int], int],
    replicated_a: bool = True,
) -> list[int]:
    """Seeds present in every cell of the design (a row of the replicated side and its partner on the other)."""
    seeds = {s for _, s in cells_a} & {s for _, s in cells_b}
    for r in rows:
        own, other = (cells_a, cells_b) if replicated_a else (cells_b, cells_a)
        seeds &= {s for (rr, s) in own if rr == r} & {s for (rr, s) in other if rr == other_row(r)}
    return sorted(seeds)


def _grid(pair: Pairing, values_a: np.ndarray, values_b: np.ndarray) -> np.ndarray:
    """``[rows, seeds, ...]`` differences of the cells from per-run values (full scores or draws)."""
    return np.stack(
        [np.stack([values_a[pair.a[(r, s)]] - values_b[pair.b[(r, s)]] for s in pair.seeds]) for r in pair.rows]
    )


def unit_variance(pair: Pairing, g: np.ndarray) -> tuple[float, float]:
    """The variance of the mean difference over units (replicates, seeds) and its degrees of freedom."""
    rows, cols = g.shape
    if pair.level == "seed":
        return float(g[0].var(ddof=1)) / cols, cols - 1.0
    if pair.level == "replicate":
        return float(g.mean(1).var(ddof=1)) / rows, rows - 1.0
    grand = g.mean()
    ms_rows = cols * float(((g.mean(1) - grand) ** 2).sum()) / (rows - 1)
    ms_cols = rows * float(((g.mean(0) - grand) ** 2).sum()) / (cols - 1)
    resid = g - g.mean(1, keepdims=True) - g.mean(0, keepdims=True) + grand
    df_e = (rows - 1) * (cols - 1)
    ms_e = float((resid**2).sum()) / df_e
    terms = [(ms_rows, rows - 1.0), (ms_cols, cols - 1.0), (-ms_e, float(df_e))]
    total = ms_rows + ms_cols - ms_e
    largest, largest_df = max((ms_rows, rows - 1.0), (ms_cols, cols - 1.0))
    if total <= largest:  # the estimate fell under one of its own mean squares: take that, on its own df
        return largest / (rows * cols), largest_df
    df = total**2 / sum(m**2 / d for m, d in terms)  # Satterthwaite
    return total / (rows * cols), max(df, 1.0)


def seed_correlation(pair: Pairing, full_a: np.ndarray, full_b: np.ndarray) -> float | None:
    """Pearson's r between A's and B's scores over the paired cells (None under 3 cells or with no spread)."""
    xs = [full_a[pair.a[c]] for c in pair.a]
    ys = [full_b[pair.b[c]] for c in pair.a]
    if len(xs) < 3 or np.std(xs) == 0 or np.std(ys) == 0:
        return None
    return float(np.corrcoef(xs, ys)[0, 1])


@dataclass
class PairedDraws:
    """Draws of the paired mean difference's example term, chunk by chunk (the shrink is fixed by the first
    chunk), and the ``Difference`` they make with the units' t."""

    pair: Pairing
    scores: Scores
    n_a: int  # the scores hold A's runs, then B's

    def __post_init__(self) -> None:
        g = _grid(self.pair, self.scores.full[: self.n_a], self.scores.full[self.n_a :])
        self.point = float(g.mean())
        self.unit_var, self.df = unit_variance(self.pair, g)
        self.unit_sd = float(g.std(ddof=1)) if g.size > 1 else 0.0
        boot = self.scores.boot(0)
        cells = _grid(self.pair, boot[: self.n_a], boot[self.n_a :]).reshape(self.pair.cells, -1)
        first = cells.mean(0)
        within = float((cells - first).var(axis=1).sum() / max(self.pair.cells - 1, 1)) / self.pair.cells
        self.v_example = v_example = float(first.var())  # the example bootstrap's own, before the shrink
        # the units' spread holds the flips at most once: take out no more of them than it holds
        self.example_var = max(0.0, v_example - min(within, self.unit_var))
        self.shrink = math.sqrt(self.example_var / v_example) if v_example > 0 else 0.0
        self.centre = float(first.mean())
        self._first = first

    def _example(self, index: int) -> np.ndarray:
        boot = self.scores.boot(index)
        return np.asarray(_grid(self.pair, boot[: self.n_a], boot[self.n_a :]).reshape(self.pair.cells, -1).mean(0))

    @property
    def se(self) -> float:
        return math.sqrt(self.unit_var + self.example_var)

    @property
    def total_df(self) -> float:
        """The df of the whole se for power: the units' (``df``), the test part's infinite df not counted. At Holm's
        thresholds a sum of a t and a normal term has tails near the t's, which Satterthwaite's df understates
        (and, counting the test part, would find smaller test splits more powerful); this errs on the safe side."""
        return float(self.df) if self.unit_var > 0 else math.inf

    def chunk(self, index: int) -> np.ndarray:
        """Chunk ``index`` of the example term's draws, centred on the point estimate."""
        example = self._first if index == 0 else self._example(index)
        return np.asarray(self.point + self.shrink * (example - self.centre))

    def difference(self, example: np.ndarray) -> Difference:
        return Difference(example, math.sqrt(self.unit_var), self.df)


def paired_text(pair: Pairing, n: int, drawer: PairedDraws) -> str:
    """How a paired comparison was drawn, as the page says it."""
    unit = {"seed": "seed", "replicate": "pretraining replicate", "two-way": "replicate x seed cell"}[pair.level]
    return (
        f"test examples ({n}) drawn with replacement, the same indices for every run of both models; the "
        f"{pair.cells} paired difference(s) over {len(pair.seeds)} common seed(s) x {len(pair.rows)} replicate(s), "
        f"per {unit}; the per-example part of their spread taken out of the example draws; the units' mean taken "
        f"as se {drawer.unit_var**0.5:.4f} x Student-t with {drawer.df:.1f} df, integrated exactly over each draw"
    )
