"""Statistics for comparing fine-tuned models: mean/std over seeds and seed-aware bootstrap intervals.

``compare_models`` compares two models on one task from their per-run ``result.json`` dicts. The
uncertainty of the difference of their mean scores has two sources, and each draw of the statistic
carries both:

* Test-set sampling. ``n`` example indices are drawn with replacement from the ``n`` test examples; the
  SAME indices go to the gold answers and to every run of both models (the test set is shared, so the
  examples are paired). Of the spread of these draws, the part that seed-to-seed prediction flips on
  single examples cause is taken out (it is already in the seed term below, which would otherwise count
  it twice): the draws are shrunk about their mean to the variance left.
* Seed-to-seed variance. The runs of one model are a sample of its fine-tuning seeds; runs of two models
  are NOT paired by seed (seed 1 of A and seed 1 of B share only the data order), so the two sides are
  independent samples of possibly different sizes. Bootstrapping 3 seeds with replacement understates
  their variance, so instead each draw adds ``sqrt(sd_a**2/n_a + sd_b**2/n_b) * t``, ``t`` a Student-t
  variate with Welch-Satterthwaite degrees of freedom: Welch's two-sample t-test, whose heavy tails
  at 2-4 degrees of freedom are what a 3-seed estimate of the seed variance needs. That term is shared out
  between the two models' means by their seed variances and each mean is kept inside the metric's range
  (``SCORE_RANGE``), so an interval never leaves what the metric allows; where no mean reaches a bound the
  draws are exactly Welch's.

The interval is the percentile interval of the draws; the two-sided p-value is
``2 * min(P(d <= 0), P(d >= 0))`` over the draws (capped at 1). When the interval contains 0 the verdict
is "no significant difference". A side with a single run (a deterministic floor such as TF-IDF +
logistic regression) contributes no seed variance; with one run on each side nothing is known about
seeds and the interval covers test sampling only (``resampled`` says so). ``seed_noise`` lets a caller
supply a seed variance estimated elsewhere (``aa_check`` does). Calibration (simulated accuracies, 300
examples with per-example difficulty, seed sd of about 3 points, 3 runs against 3 and against a
deterministic floor): ``tests/finetune/test_finetune_calibration.py`` bounds the rate of "significant" at
95% with no true difference and prints the power at a true difference. As a second opinion,
``aso_eps`` is Almost Stochastic Order (deepsig's ``eps_min``, see ``domainbert.report.aso``) of A's
per-run scores over B's; with 3 runs a side it is far from calibrated (the calibration test prints how often
it falls below 0.2 with no true difference), so it qualifies a verdict and never replaces it.

Left out: a seed effect shared by both models (e.g. a lucky data order for every model), multiple-
comparison corrections across tasks and pairs, and non-normal seed distributions beyond what the t tails
cover (a model that collapses on some seeds has a large sd and so a wide interval, which is the honest
reading). The fast count-matrix path of ``compare_models`` is tested against a plain paired bootstrap over
any metric function (``tests/reference/bootstrap.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from domainbert.finetune.counts import count_metric
from domainbert.report.aso import aso_eps

NO_DIFFERENCE = "no significant difference"
SCORE_RANGE = (0.0, 1.0)  # every metric compared here (F1, macro-F1, accuracy) is a share
METHOD_EXAMPLES = "paired example bootstrap"
METHOD_SEEDS = "paired example bootstrap + Welch-t seed draw, each mean bounded to the metric's range"


def mean_std(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Mean and sample standard deviation (ddof=1; 0.0 for a single value) and the count."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError("mean_std of no values")
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if arr.size > 1 else 0.0, "n": int(arr.size)}


def bootstrap_indices(n: int, n_samples: int, seed: int) -> np.ndarray:
    """``[n_samples, n]`` example indices drawn with replacement (the draws every function here uses)."""
    if n < 1:
        raise ValueError("cannot bootstrap an empty test set")
    return np.random.default_rng(seed).integers(0, n, size=(n_samples, n))


def _interval(
    diffs: np.ndarray, point: float, confidence: float, names: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The percentile interval, two-sided p-value and verdict (``"<name> better"`` when ``names`` are given)."""
    alpha = 1.0 - confidence
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    p = min(1.0, 2.0 * min(float(np.mean(diffs <= 0)), float(np.mean(diffs >= 0))))
    significant = not (low <= 0.0 <= high)
    if significant:
        verdict = "A better" if point > 0 else "B better"
        if names is not None:
            verdict = f"{names[0] if point > 0 else names[1]} better"
    else:
        verdict = NO_DIFFERENCE
    return {
        "diff": float(point),
        "low": float(low),
        "high": float(high),
        "p_value": p,
        "significant": significant,
        "verdict": verdict,
        "confidence": confidence,
    }


ASO_ITERATIONS = 200  # deepsig's default is 1000; 200 keeps a comparison to a few milliseconds


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


def _scorer(
    runs: list[dict[str, Any]], metric: str | None, n_samples: int, seed: int
) -> tuple[str, Callable[[list[dict[str, Any]]], tuple[np.ndarray, np.ndarray]]]:
    """The metric's name and a function from runs to each run's metric on the full test set ``[S]`` and on every
    bootstrap draw ``[S, n_samples]`` (the same draws for all runs; classification labels: those of ``runs``)."""
    first = runs[0]
    metric = metric or first.get("primary_metric") or ("f1" if first["task_type"] == "ner" else "macro_f1")
    multi = bool(first.get("multi_label", False))
    labels = None
    if first["task_type"] != "ner":
        labels = sorted(
            {x for r in runs for rows in (r["gold"], r["pred"]) for row in rows for x in (row if multi else [row])}
        )
    weights = np.zeros((n_samples, len(first["gold"])))
    np.add.at(weights, (np.arange(n_samples)[:, None], bootstrap_indices(len(first["gold"]), n_samples, seed)), 1.0)

    def score(some: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        full, boot = [], []
        for r in some:
            counts, fn = count_metric(r["task_type"], metric, r["gold"], r["pred"], labels, multi)
            full.append(float(fn(counts.sum(0))))
            boot.append(fn(weights @ counts))
        return np.asarray(full), np.asarray(boot)

    return metric, score


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


def _draws(
    boot_a: np.ndarray,
    boot_b: np.ndarray,
    noise: list[SeedNoise | None],
    sizes: tuple[int, int],
    n_samples: int,
    seed: int,
) -> tuple[np.ndarray, float | None]:
    """Draws of A's mean minus B's mean with each model's mean kept inside the metric's range; the Welch df.

    Each draw is the example bootstrap of the difference (the per-example part of seed noise taken out, since
    the seed term holds it) plus ``sqrt(sd_a^2/n_a + sd_b^2/n_b) x t`` with Welch-Satterthwaite degrees of
    freedom. That seed term is shared out between the two models in proportion to their seed variances, so
    each model's own mean draw is visible, and each is clipped to ``SCORE_RANGE``: a mean score cannot leave
    it, so neither can the difference, whatever the t tails draw at 2 to 4 degrees of freedom. Where no mean
    reaches a bound the draws are exactly Welch's (the calibration test's regime); only draws a metric cannot
    produce are moved.
    """
    mean_a, mean_b = boot_a.mean(0), boot_b.mean(0)
    example = mean_a - mean_b
    v = [nz.sd**2 / size if nz is not None and nz.sd > 0 else 0.0 for nz, size in zip(noise, sizes, strict=True)]
    terms = [(var, nz.df) for var, nz in zip(v, noise, strict=True) if var > 0 and nz is not None]
    if not terms:
        return example, None
    v_seed = sum(var for var, _ in terms)
    seed_df = v_seed**2 / sum(var**2 / df for var, df in terms)  # Welch-Satterthwaite
    within = sum(nz.within / size for nz, size in zip(noise, sizes, strict=True) if nz is not None)
    v_example = float(example.var())
    shrink = math.sqrt(max(0.0, v_example - within) / v_example) if v_example > 0 else 0.0
    seed_term = math.sqrt(v_seed) * np.random.default_rng([seed, 1]).standard_t(seed_df, n_samples)
    sides = []
    for mean, share, sign in ((mean_a, v[0] / v_seed, 1.0), (mean_b, v[1] / v_seed, -1.0)):
        centre = float(mean.mean())
        sides.append(np.clip(centre + shrink * (mean - centre) + sign * share * seed_term, *SCORE_RANGE))
    return sides[0] - sides[1], seed_df


def _check_runs(results_a: list[dict[str, Any]], results_b: list[dict[str, Any]]) -> None:
    if not results_a or not results_b:
        raise ValueError("each model needs at least one run")
    for runs in (results_a, results_b):
        seeds = [r["seed"] for r in runs]
        if len(set(seeds)) != len(seeds) or len({r["model"] for r in runs}) != 1:
            raise ValueError(f"one side mixes models or repeats a seed: {[(r['model'], r['seed']) for r in runs]}")
    tasks = {r["task"] for r in results_a + results_b}
    if len(tasks) != 1:
        raise ValueError(f"results of different tasks: {sorted(tasks)}")
    gold = results_a[0]["gold"]
    for r in results_a + results_b:
        if r["gold"] != gold:
            raise ValueError(f"{r['model']} seed {r['seed']} was tested on different gold answers")


def compare_models(
    results_a: list[dict[str, Any]],
    results_b: list[dict[str, Any]],
    n_samples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    metric: str | None = None,
    seed_noise: tuple[SeedNoise | None, SeedNoise | None] | None = None,
) -> dict[str, Any]:
    """Compare two models on one task from their ``result.json`` dicts (one per run), seed-aware.

    The statistic is mean over A's runs minus mean over B's runs; each draw is an example bootstrap of it
    plus a Welch Student-t draw of the seed noise (see the module docstring). Seeds need not match.

    Args:
        results_a: model A's runs on one task (one per seed; a single run is taken as deterministic).
        results_b: model B's runs on the same task and test set.
        n_samples: draws.
        confidence: interval level.
        seed: seed of the draws.
        metric: the metric to compare; defaults to the results' ``primary_metric``.
        seed_noise: per side, a ``SeedNoise`` to use instead of the one estimated from that side's runs.

    Returns:
        ``model_a``, ``model_b``, ``task``, ``metric``, the seeds (``_seed_table``), ``n_examples``,
        ``n_samples``, ``a``/``b`` (``mean_std`` of the per-run test metric), how it was drawn (``_method``),
        ``aso_eps`` (ASO ``eps_min`` of A over B; None when neither side has 2 runs), and the interval of A's
        mean minus B's (``_interval``: ``diff``, ``low``, ``high``, ``p_value``, ``significant``, ``verdict``).

    Raises:
        ValueError: a side without runs, mixed models or repeated seeds, different tasks or test sets.
    """
    runs_a = sorted(results_a, key=lambda r: r["seed"])
    runs_b = sorted(results_b, key=lambda r: r["seed"])
    _check_runs(runs_a, runs_b)
    first, gold = runs_a[0], runs_a[0]["gold"]
    metric, score = _scorer(runs_a + runs_b, metric, n_samples, seed)
    (full_a, boot_a), (full_b, boot_b), sizes = score(runs_a), score(runs_b), (len(runs_a), len(runs_b))
    noise = [
        given if given is not None else seed_noise_of(full, boot)
        for given, full, boot in zip(seed_noise or (None, None), (full_a, full_b), (boot_a, boot_b), strict=True)
    ]
    point = float(full_a.mean() - full_b.mean())
    stat, seed_df = _draws(boot_a, boot_b, noise, sizes, n_samples, seed)
    out = _interval(stat, point, confidence, (first["model"], runs_b[0]["model"]))
    aso = _aso(full_a, full_b, confidence, seed) if max(sizes) >= 2 else None
    return {
        "model_a": first["model"],
        "model_b": runs_b[0]["model"],
        "task": first["task"],
        "metric": metric,
        **_seed_table(runs_a, runs_b, full_a, full_b),
        "n_examples": len(gold),
        "n_samples": n_samples,
        "a": mean_std(full_a),
        "b": mean_std(full_b),
        **_method(len(gold), n_samples, sizes, noise, seed_df),
        "aso_eps": aso,
        **out,
    }


def _aso(full_a: np.ndarray, full_b: np.ndarray, confidence: float, seed: int) -> float:
    return aso_eps(full_a, full_b, confidence_level=confidence, num_bootstrap_iterations=ASO_ITERATIONS, seed=seed)


def _method(
    n: int, n_samples: int, sizes: tuple[int, int], noise: list[SeedNoise | None], seed_df: float | None
) -> dict[str, Any]:
    """``method``; ``seed_sd`` ({"a", "b"}: sd of one run's score used for the seed term, None for a one-run
    side); ``seed_df`` (Welch degrees of freedom, None without a seed term); ``resampled`` (what was drawn)."""
    return {
        "method": METHOD_SEEDS if seed_df is not None else METHOD_EXAMPLES,
        "seed_sd": {"a": noise[0].sd if noise[0] else None, "b": noise[1].sd if noise[1] else None},
        "seed_df": seed_df,
        "resampled": _resampled(n, n_samples, sizes, noise, seed_df),
    }


def _seed_table(
    runs_a: list[dict[str, Any]], runs_b: list[dict[str, Any]], full_a: np.ndarray, full_b: np.ndarray
) -> dict[str, Any]:
    """``seeds`` (either side's), ``seeds_a``/``seeds_b`` and ``per_seed`` ([seed, A's score or None, B's])."""
    seeds_a, seeds_b = [r["seed"] for r in runs_a], [r["seed"] for r in runs_b]
    score_a = dict(zip(seeds_a, full_a.tolist(), strict=True))
    score_b = dict(zip(seeds_b, full_b.tolist(), strict=True))
    seeds = sorted(set(seeds_a) | set(seeds_b))
    return {
        "seeds": seeds,
        "seeds_a": seeds_a,
        "seeds_b": seeds_b,
        "per_seed": [[s, score_a.get(s), score_b.get(s)] for s in seeds],
    }


def _resampled(
    n: int,
    n_samples: int,
    sizes: tuple[int, int],
    noise: list[SeedNoise | None],
    seed_df: float | None,
) -> str:
    text = (
        f"test examples ({n}) drawn with replacement {n_samples} times, the same indices for all "
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
        text + "; the per-example part of seed noise taken out of the example draws; seed noise drawn as "
        f"sqrt(sd_a^2/n_a + sd_b^2/n_b) x Student-t with {seed_df:.1f} Welch df, shared out between the two "
        "models' means by their seed variances, each mean kept inside the metric's range (" + "; ".join(sides) + ")"
    )


def _own_noise(runs: list[dict[str, Any]], metric: str | None, n_samples: int, seed: int) -> SeedNoise:
    """A model's seed noise from its own runs (two or more)."""
    _, score = _scorer(runs, metric, n_samples, seed)
    return cast(SeedNoise, seed_noise_of(*score(runs)))  # not None: two runs or more


def _pooled_others(noise: dict[str, SeedNoise], model: str) -> SeedNoise | None:
    """The seed sd pooled over the OTHER models of a task (df-weighted), with ``model``'s own per-example part;
    None when the task has no other model with two runs."""
    others = [nz for m, nz in noise.items() if m != model]
    if not others:
        return None
    df = sum(nz.df for nz in others)
    return SeedNoise(sd=math.sqrt(sum(nz.df * nz.sd**2 for nz in others) / df), df=df, within=noise[model].within)


def aa_check(
    results: list[dict[str, Any]],
    n_samples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    metric: str | None = None,
) -> dict[str, Any]:
    """A/A check on real results: how often is one model against ITSELF (other seeds) called significant?

    Design: for every task and every model with at least 2 runs on it, each run is compared with each other
    run of the same model (one run per side, so no true difference). The seed noise of both sides is the
    ``SeedNoise`` pooled (sd squared weighted by degrees of freedom) over the OTHER models' runs of that
    task, with this model's own per-example part (``within``). The pair's own runs are kept out of the sd
    on purpose: estimated from the model's own 3 runs, the sd contains the very difference it judges, and
    the test can then never reject (vacuous). The check therefore asks whether seed variance is alike
    across the models of a task; a model whose seeds scatter far more than its neighbours' (e.g. one that
    collapses on some seeds) is flagged, as it should be. Tasks with a single multi-run model give no
    comparisons (counted in ``skipped``).

    Returns:
        ``comparisons``, ``significant``, ``rate`` (None without comparisons), ``skipped`` (pairs without a
        pooled estimate) and ``groups`` (per task and model: ``task``, ``model``, ``pairs``,
        ``significant``).
    """
    by_group: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in results:
        by_group.setdefault(r["task"], {}).setdefault(r["model"], []).append(r)
    draws_seed = seed  # each pair gets its own draws
    groups, comparisons, significant, skipped = [], 0, 0, 0
    for task, models in sorted(by_group.items()):
        models = {m: sorted(rs, key=lambda r: r["seed"]) for m, rs in models.items() if len(rs) >= 2}
        noise = {m: _own_noise(runs, metric, n_samples, seed) for m, runs in models.items()}
        for model, runs in sorted(models.items()):
            pairs = [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))]
            pooled = _pooled_others(noise, model)
            if pooled is None:
                skipped += len(pairs)
                continue
            hits = sum(
                compare_models(
                    [runs[i]],
                    [runs[j]],
                    n_samples=n_samples,
                    confidence=confidence,
                    seed=draws_seed + k,
                    metric=metric,
                    seed_noise=(pooled, pooled),
                )["significant"]
                for k, (i, j) in enumerate(pairs, 1)
            )
            draws_seed += len(pairs)
            groups.append({"task": task, "model": model, "pairs": len(pairs), "significant": hits})
            comparisons += len(pairs)
            significant += hits
    rate = significant / comparisons if comparisons else None
    return {"comparisons": comparisons, "significant": significant, "rate": rate, "skipped": skipped, "groups": groups}
