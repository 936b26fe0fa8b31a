"""A/A checks: how often the comparison calls "no true difference" significant, on real runs' scores.

Two checks, both through the real ``stats.compare_models`` and ``power.holm``:

* ``aa_check`` (per comparison, a study's table): each run of a model against each other run of the SAME model,
  one run a side and unpaired, the seed noise pooled over the task's OTHER models (estimated from the model's own
  runs, the sd contains the very difference it judges and the test can never reject). A model whose seeds
  scatter far more than its neighbours' (one that collapses on some seeds) is flagged, as it should be.
* ``aa_pages`` (per page, the family-wise rate): pages built from real runs where every claim is false. Each
  page takes, per model of a task, its runs split at random into two halves that play two "arms"; the second
  half's seeds are relabelled to the first's (one model against itself under shifted seeds, paired as the
  report pairs arms, though the seeds share nothing). With pretraining replicates, a model's replicates are split
  instead, as two arms of one procedure. Holm runs over the page's comparisons, and the page is a false
  positive when any survives. The rate over many pages must stay at or under the family-wise level.

This module reads no file; ``studies/scripts/study.py`` (``aa_check``) and ``tests/system/studies/test_aa.py`` (``aa_pages``)
feed it runs. It is study tooling, not part of the package: the report never runs an A/A check.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from domainbert.report.draws import RunScores
from domainbert.report.paired import replicate_of
from domainbert.report.power import holm
from domainbert.report.results import group_results
from domainbert.report.stats import SeedNoise, compare_models, seed_noise_of


def _own_noise(runs: list[dict[str, Any]], metric: str | None, n_samples: int, seed: int) -> SeedNoise:
    """A model's seed noise from its own runs (two or more)."""
    scores = RunScores(runs, metric, seed, n_samples)
    noise = seed_noise_of(scores.full, scores.boot(0))
    assert noise is not None  # two runs or more
    return noise


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
    """Per comparison: one model against ITSELF (other seeds, unpaired, pooled seed noise), called significant
    how often (see the module).

    Returns:
        ``comparisons``, ``significant``, ``rate`` (None without comparisons), ``skipped`` (pairs without a
        pooled estimate) and ``groups`` (per task and model: ``task``, ``model``, ``pairs``, ``significant``).
    """
    draws_seed = seed  # each pair gets its own draws
    groups, comparisons, significant, skipped = [], 0, 0, 0
    for task, models in sorted(group_results(results).items()):
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
                ).significant
                for k, (i, j) in enumerate(pairs, 1)
            )
            draws_seed += len(pairs)
            groups.append({"task": task, "model": model, "pairs": len(pairs), "significant": hits})
            comparisons += len(pairs)
            significant += hits
    rate = significant / comparisons if comparisons else None
    return {"comparisons": comparisons, "significant": significant, "rate": rate, "skipped": skipped, "groups": groups}


def null_pair(
    runs: list[dict[str, Any]], rng: np.random.Generator
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """Two "arms" made of one model's runs, with no true difference between them: its replicates split in two
    (each half keeping its seeds) when it has four or more, else its seeds split in two and the second half's
    seeds relabelled to the first's (shifted seeds); None with fewer than four runs or units."""
    reps = sorted({replicate_of(r) for r in runs})
    if len(reps) >= 4:
        order = [int(x) for x in rng.permutation(reps)]
        half = len(order) // 2
        halves = (order[:half], order[half : 2 * half])
        renumber = {rep: i + 1 for side in halves for i, rep in enumerate(side)}
        pair = [
            [{**r, "model": name, "replicate": renumber[replicate_of(r)]} for r in runs if replicate_of(r) in side]
            for name, side in zip(("A", "B"), halves, strict=True)
        ]
        return pair[0], pair[1]
    if len(reps) > 1 or len(runs) < 4:
        return None
    shuffled = [runs[int(i)] for i in rng.permutation(len(runs))]
    half = len(shuffled) // 2
    first, second = shuffled[:half], shuffled[half : 2 * half]
    a = [{**r, "model": "A"} for r in first]
    b = [{**r, "model": "B", "seed": partner["seed"]} for r, partner in zip(second, first, strict=True)]
    return a, b


def aa_pages(
    results: list[dict[str, Any]],
    pages: int = 200,
    n_samples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The family-wise false-positive rate over ``pages`` pages of true nulls built from real runs (see module).

    Each page holds one null comparison per task and model with four or more runs (or replicates), Holm over
    all of them. Returns ``pages``, ``comparisons`` (per page), ``false_pages`` (pages with any claim surviving
    Holm), ``rate``, ``unadjusted_rate`` (share of single comparisons significant before correction) and
    ``paired`` (share of the comparisons that were paired).
    """
    alpha = 1 - confidence
    rng = np.random.default_rng(seed)
    groups = [runs for models in group_results(results).values() for runs in models.values()]
    false_pages, single_hits, single_total, paired, per_page = 0, 0, 0, 0, 0
    for page in range(pages):
        p_values = []
        for k, runs in enumerate(groups):
            pair = null_pair(runs, rng)
            if pair is None:
                continue
            out = compare_models(
                *pair, n_samples=n_samples, confidence=confidence, seed=page * 1000 + k, family=len(groups)
            )
            p_values.append(out.p_value)
            paired += int(out.design.paired)
        per_page = len(p_values)
        adjusted = holm(p_values)
        false_pages += any(p is not None and p < alpha for p in adjusted)
        single_hits += sum(p < alpha for p in p_values)
        single_total += len(p_values)
    if not single_total:
        raise ValueError("no model has four or more runs to split: an A/A page needs them")
    return {
        "pages": pages,
        "comparisons": per_page,
        "false_pages": false_pages,
        "rate": false_pages / pages,
        "unadjusted_rate": single_hits / single_total,
        "paired": paired / single_total,
    }
