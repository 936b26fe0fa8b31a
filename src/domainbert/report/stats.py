"""Statistics for comparing fine-tuned models on one task: paired where the design allows, seed-aware always.

``compare_models`` compares two models from their per-run ``result.json`` dicts. The difference of their mean
scores has three sources of uncertainty, and each draw of the statistic carries all of those the design has:

* Test-set sampling: test examples are drawn with replacement, the SAME draws for every run of both models
  (``report.draws``).
* Fine-tuning seeds. A seed fixes the head's initialisation, data order and dropout for every model, so runs
  of two models under one seed are a pair. When both sides have runs under two or more common seeds the
  comparison is PAIRED (``report.paired``): its unit term comes from the per-seed differences, from which the
  seed effect the models share has cancelled (the demo's arms correlate at r = 0.97-1.00 across seeds).
* Pretraining replicates (``pretrain.replicates``): with several per arm, replicates are the units and the
  seeds nest inside them; with one, the verdict is about that checkpoint, not the procedure (``replicates``
  says how many each side had).

A side with a single run (a deterministic floor such as TF-IDF + logistic regression) cannot be paired: the
comparison is UNPAIRED, the other side's seed variance taken as ``sqrt(sd_a^2/n_a + sd_b^2/n_b) x t`` with
Welch-Satterthwaite df (Welch's test), the interval kept inside the range of a difference of shares.
``seed_noise`` lets a caller supply a seed variance estimated elsewhere, e.g. pooled over a task's models
(``studies.aa``), which also makes the comparison unpaired.

Every comparison returns ``se`` and ``df`` of its draws, the one design summary from which
``power.detectable_difference`` computes what it can detect. The p-value and bounds integrate the t exactly
over each example draw (``draws.Difference``): Monte Carlo only in the test-sampling term, the t-test's own p where
that term is zero, and ``(k + 1) / (B + 1)`` per tail (``draws.p_value``, never 0) where there is no seed term.
The draws come from the comparison's own stream (``draws.comparison_stream``: the models and the task) and go on
in chunks until the bounds' Monte Carlo error is under ``draws.BOUND_ERROR`` and, while the p-value is near a
threshold, the page's smallest Holm threshold ``alpha / family`` is resolved (``draws.draws_needed``). Multiple comparisons are corrected by the caller (``rows.holm_adjusted``, over the page); this module gives the
unadjusted interval and p-value. Calibration on simulated scores:
``tests/system/finetune/test_finetune_calibration.py`` (unpaired), ``tests/stage/report/test_report_paired.py`` (paired,
the A/A rate over whole pages) and ``tests/unit/report/test_report_false_positives.py`` (the family-wise rate of
pages simulated from a model fitted to real runs, ``studies/19-false-positive-calibration.md``). The fast count-matrix path is tested against a plain paired bootstrap over any
metric function (``tests/reference/bootstrap.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from domainbert.report.draws import (
    BOUND_ERROR,
    MAX_CHUNKS,
    NO_DIFFERENCE,
    RESOLUTION,
    Difference,
    RunScores,
    Scores,
    bootstrap_indices,
    comparison_stream,
    draws_needed,
    interval,
    sureness_text,
)
from domainbert.report.inputs import FinetuneRun, Record
from domainbert.report.model_comparison import DrawDesign, MeanStd, ModelComparison, mean_std, seed_table
from domainbert.report.paired import PairedDraws, Pairing, paired_text, pairing, seed_correlation

__all__ = [
    "NO_DIFFERENCE",
    "MeanStd",
    "ModelComparison",
    "SeedNoise",
    "bootstrap_indices",
    "compare_models",
    "draw_until_sure",
    "mean_std",
    "seed_noise_of",
]

SCORE_RANGE = (0.0, 1.0)  # every metric compared here (F1, macro-F1, accuracy) is a share
METHOD_EXAMPLES = "paired example bootstrap"
METHOD_SEEDS = "paired example bootstrap + Welch-t seed term, integrated exactly"
METHOD_PAIRED = "paired by seed: example bootstrap + Student-t of the per-seed differences' mean, integrated exactly"


@dataclass(frozen=True)
class SeedNoise:
    """Seed-to-seed noise of ONE run's test score of a model on a task (in the metric's units).

    ``sd``: standard deviation of the full-test score over seeds; ``df``: its degrees of freedom (runs
    minus one, summed over models when pooled); ``within``: the part of ``sd**2`` made of per-example
    prediction flips, which the example bootstrap already contains (taken out of it to avoid counting it
    twice).
    """

    sd: float
    df: float
    within: float


def seed_noise_of(full: np.ndarray, boot: np.ndarray) -> SeedNoise | None:
    """``SeedNoise`` of one model from its runs' full-test and per-draw scores; None with fewer than 2 runs.

    ``within``: the bootstrap variance of each run's deviation from the runs' mean, summed over runs and
    divided by ``runs - 1`` (the unbiased per-run variance of independent per-example flips).
    """
    if len(full) < 2:
        return None
    deviation = boot - boot.mean(0)
    return SeedNoise(
        sd=float(full.std(ddof=1)), df=len(full) - 1, within=float(deviation.var(axis=1).sum() / (len(full) - 1))
    )


def _units(runs: list[FinetuneRun], values: np.ndarray) -> np.ndarray:
    """One value per unit of an unpaired side: per run, or per replicate (the mean of its seeds) with several."""
    reps = sorted({r.replicate for r in runs})
    if len(reps) < 2:
        return values
    return np.stack([values[[i for i, r in enumerate(runs) if r.replicate == rep]].mean(0) for rep in reps])


class UnpairedDraws:
    """Draws of A's mean minus B's, unpaired: the example bootstrap plus Welch's seed term (see the module)."""

    def __init__(
        self,
        scores: Scores,
        runs: tuple[list[FinetuneRun], list[FinetuneRun]],
        noise: tuple[SeedNoise | None, SeedNoise | None] | None,
    ) -> None:
        self.scores, self.runs = scores, runs
        full = self._sides(scores.full)
        boot = self._sides(scores.boot(0))
        self._first = boot
        self.sizes = (len(full[0]), len(full[1]))
        self.noise: list[SeedNoise | None] = [
            given if given is not None else seed_noise_of(f, b)
            for given, f, b in zip(noise or (None, None), full, boot, strict=True)
        ]
        self.point = float(full[0].mean() - full[1].mean())
        v = [
            nz.sd**2 / n if nz is not None and nz.sd > 0 else 0.0 for nz, n in zip(self.noise, self.sizes, strict=True)
        ]
        self.shares = v
        terms = [(var, nz.df) for var, nz in zip(v, self.noise, strict=True) if var > 0 and nz is not None]
        self.unit_var = sum(var for var, _ in terms)
        self.df: float | None = self.unit_var**2 / sum(var**2 / df for var, df in terms) if terms else None
        example = boot[0].mean(0) - boot[1].mean(0)
        within = sum(nz.within / n for nz, n in zip(self.noise, self.sizes, strict=True) if nz is not None)
        v_example = float(example.var())
        self.example_var = max(0.0, v_example - min(within, self.unit_var)) if terms else v_example
        self.shrink = math.sqrt(self.example_var / v_example) if v_example > 0 else 0.0
        self.centre = float(example.mean())

    def _sides(self, values: np.ndarray) -> list[np.ndarray]:
        """Per side, one value (or row of draws) per unit: ``values`` holds A's runs, then B's."""
        n_a = len(self.runs[0])
        return [_units(self.runs[0], values[:n_a]), _units(self.runs[1], values[n_a:])]

    @property
    def se(self) -> float:
        return math.sqrt(self.unit_var + self.example_var)

    @property
    def total_df(self) -> float:
        if self.df is None or self.unit_var == 0:
            return math.inf
        return float(self.df)  # the seed term's df, as PairedDraws.total_df says why

    def chunk(self, index: int) -> np.ndarray:
        """Chunk ``index`` of the example term's draws: the plain bootstrap of A - B without a seed term, else
        shrunk (as ``PairedDraws``) and centred on the point estimate."""
        boot = self._first if index == 0 else self._sides(self.scores.boot(index))
        example = np.asarray(boot[0].mean(0) - boot[1].mean(0))
        if self.df is None:
            return example
        return np.asarray(self.point + self.shrink * (example - self.centre))

    def difference(self, example: np.ndarray) -> Difference:
        scale = math.sqrt(self.unit_var) if self.df is not None else 0.0
        return Difference(example, scale, self.df, span=SCORE_RANGE[1] - SCORE_RANGE[0])


def _check_runs(results_a: list[FinetuneRun], results_b: list[FinetuneRun]) -> None:
    if not results_a or not results_b:
        raise ValueError("each model needs at least one run")
    for runs in (results_a, results_b):
        cells = [(r.replicate, r.seed) for r in runs]
        if len(set(cells)) != len(cells) or len({r.model for r in runs}) != 1:
            raise ValueError(f"one side mixes models or repeats a seed: {[(r.model, r.seed) for r in runs]}")
    tasks = {r.task for r in results_a + results_b}
    if len(tasks) != 1:
        raise ValueError(f"results of different tasks: {sorted(tasks)}")
    test = _test_set(results_a[0])
    for r in results_a + results_b:
        if _test_set(r) != test:
            raise ValueError(f"{r.model} seed {r.seed} was tested on different gold answers")


def _test_set(result: FinetuneRun) -> object:
    """What identifies a run's test set: its gold answers, or a score file's ``test_set`` hash."""
    return list(result.gold) if result.gold is not None else result.test_set


def compare_models(
    results_a: Sequence[FinetuneRun | Record],
    results_b: Sequence[FinetuneRun | Record],
    n_samples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    metric: str | None = None,
    seed_noise: tuple[SeedNoise | None, SeedNoise | None] | None = None,
    family: int = 1,
) -> ModelComparison:
    """Compare two models on one task from their runs (one per seed; a ``result.json`` object is read as its
    run, ``FinetuneRun.of``): paired where possible.

    Args:
        results_a: model A's runs on one task (one per seed and replicate; a single run is deterministic).
        results_b: model B's runs on the same task and test set.
        n_samples: draws per chunk (and at least this many in all).
        confidence: interval level.
        seed: seed of the draws, with the models and task making the comparison's own stream.
        metric: the metric to compare; defaults to the results' ``primary_metric``.
        seed_noise: per side, a ``SeedNoise`` to use instead of the one estimated from that side's runs
            (forces the unpaired comparison).
        family: the comparisons of the page; draws go on until ``alpha / family`` is resolved (see module).

    Returns:
        The ``ModelComparison``: A's mean minus B's with its interval, p-value and reading, each side's
        ``MeanStd``, the seeds, how it was drawn (``DrawDesign``) and the draws themselves.

    Raises:
        ValueError: a side without runs, mixed models or repeated cells, different tasks or test sets.
    """
    runs_a = sorted(map(FinetuneRun.of, results_a), key=lambda r: (r.replicate, r.seed))
    runs_b = sorted(map(FinetuneRun.of, results_b), key=lambda r: (r.replicate, r.seed))
    _check_runs(runs_a, runs_b)
    first = runs_a[0]
    stream = comparison_stream(seed, (first.model, runs_b[0].model, first.task))
    scores = RunScores(runs_a + runs_b, metric, stream, n_samples)
    metric = scores.metric
    full_a, full_b = scores.full[: len(runs_a)], scores.full[len(runs_a) :]
    drawer, pair = _drawer(scores, runs_a, runs_b, seed_noise)
    stat = draw_until_sure(drawer, n_samples, 1 - confidence, family)
    out = interval(stat, drawer.point, confidence, (first.model, runs_b[0].model))
    design = _design(drawer, pair, full_a, full_b, runs_a, runs_b, scores.n_examples)
    return ModelComparison(
        **asdict(out),
        model_a=first.model,
        model_b=runs_b[0].model,
        task=first.task,
        metric=metric,
        n_examples=scores.n_examples,
        a=mean_std(full_a),
        b=mean_std(full_b),
        seeds=seed_table([r.seed for r in runs_a], [r.seed for r in runs_b], full_a, full_b),
        design=replace(
            design,
            n_samples=len(stat),
            p_counted=stat.monte_carlo,
            resampled=f"{design.resampled}; {sureness_text(stat, confidence)}",
        ),
        p_exact=stat.exact,
        p_error=stat.p_error(),
        bounds_error=stat.bounds_error(1 - confidence),
        draws=stat,
    )


def _drawer(
    scores: Scores,
    runs_a: list[FinetuneRun],
    runs_b: list[FinetuneRun],
    seed_noise: tuple[SeedNoise | None, SeedNoise | None] | None,
) -> tuple[PairedDraws | UnpairedDraws, Pairing | None]:
    """The draws of a comparison and its pairing: paired where the two sides' runs pair (``pairing``) and no
    seed noise is given, else unpaired (pairing None)."""
    pair = pairing(runs_a, runs_b) if seed_noise is None else None
    if pair is not None:
        return PairedDraws(pair, scores, len(runs_a)), pair
    return UnpairedDraws(scores, (runs_a, runs_b), seed_noise), None


def draw_until_sure(
    drawer: PairedDraws | UnpairedDraws, n_samples: int, alpha: float, family: int, sure_bounds: bool = True
) -> Difference:
    """Chunks of draws until the figures are sure enough (``_short``): the comparison's distribution.
    ``sure_bounds`` False: only the p-value's rule (a simulation that reads no interval)."""
    chunks = [drawer.chunk(0)]
    needed = draws_needed(n_samples, alpha, family)
    while True:
        dist = drawer.difference(np.concatenate(chunks))
        if not _short(dist, needed, alpha, family, sure_bounds) or (
            not dist.monte_carlo and len(chunks) >= MAX_CHUNKS
        ):
            return dist
        chunks.append(drawer.chunk(len(chunks)))


def _short(dist: Difference, needed: int, alpha: float, family: int, sure_bounds: bool = True) -> bool:
    """Whether more draws are needed: a Monte Carlo p near a threshold short of resolving the page's smallest
    one, an integrated p whose error is more than a ``RESOLUTION``-th of it, or bounds less sure than
    ``BOUND_ERROR``."""
    p = dist.p_value()
    if dist.monte_carlo:
        return len(dist) < needed and p < 2 * alpha
    if p < 2 * alpha and dist.p_error() > alpha / max(family, 1) / RESOLUTION:
        return True
    return sure_bounds and dist.bounds_error(alpha) > BOUND_ERROR


def _design(
    drawer: PairedDraws | UnpairedDraws,
    pair: Pairing | None,
    full_a: np.ndarray,
    full_b: np.ndarray,
    runs_a: list[FinetuneRun],
    runs_b: list[FinetuneRun],
    n: int,
) -> DrawDesign:
    """How the comparison was drawn: pairing, replicates, se and df of the draws, and the text saying so."""
    replicates = {"a": len({r.replicate for r in runs_a}), "b": len({r.replicate for r in runs_b})}
    if isinstance(drawer, PairedDraws) and pair is not None:
        return DrawDesign(
            paired=True,
            pairing=pair.level,
            units=pair.units,
            seed_correlation=seed_correlation(pair, full_a, full_b),
            replicates=replicates,
            se=drawer.se,
            df=drawer.total_df,
            n_examples=n,
            seed_sd={"a": mean_std(full_a).std or None, "b": mean_std(full_b).std or None},
            seed_df=drawer.df,
            method=METHOD_PAIRED if pair.level == "seed" else f"paired by {pair.level}: {METHOD_PAIRED}",
            resampled=paired_text(pair, n, drawer),
            unit_sd=drawer.unit_sd,
        )
    noise: list[SeedNoise | None] = drawer.noise if isinstance(drawer, UnpairedDraws) else [None, None]
    seed_df = drawer.df if isinstance(drawer, UnpairedDraws) else None
    return DrawDesign(
        paired=False,
        pairing=None,
        units=None,
        seed_correlation=None,
        replicates=replicates,
        se=drawer.se,
        df=drawer.total_df,
        n_examples=n,
        seed_sd={"a": noise[0].sd if noise[0] else None, "b": noise[1].sd if noise[1] else None},
        seed_df=seed_df,
        method=METHOD_SEEDS if seed_df is not None else METHOD_EXAMPLES,
        resampled=_unpaired_text(n, (len(runs_a), len(runs_b)), noise, seed_df),
    )


def _unpaired_text(n: int, sizes: tuple[int, int], noise: list[SeedNoise | None], seed_df: float | None) -> str:
    text = (
        f"test examples ({n}) drawn with replacement, the same indices for all "
        f"{sizes[0]} + {sizes[1]} runs of both models; statistic = mean over A's runs - mean over B's runs"
    )
    if seed_df is None:
        return text + (
            "; seed variance could not be estimated (one run per side): the interval covers test sampling only"
        )
    sides = []
    for name, nz, size in zip("AB", noise, sizes, strict=True):
        if nz is None:
            sides.append(f"{name} has one run, taken as deterministic")
        else:
            sides.append(f"{name}: sd {nz.sd:.4f} over {nz.df:g} df, {size} run(s)")
    return (
        text + "; unpaired; the per-example part of seed noise taken out of the example draws; seed noise taken as "
        f"sqrt(sd_a^2/n_a + sd_b^2/n_b) x Student-t with {seed_df:.1f} Welch df, integrated exactly over each draw ("
        + "; ".join(sides)
        + ")"
    )
