"""The paired comparison is calibrated on real runs: over every true null that real seeds make, its p-values are
no smaller than chance allows.

The runs are ``studies/scores/science-demo-6seeds.json.gz`` (make demo's design with six seeds: base, original,
continued and control on science-terms-ner, each run's per-sentence counts as committed). A null splits one
model's six seeds into two "arms" of three, the second arm's seeds relabelled to the first's, so the arms pair as
the report pairs them though nothing differs: ten splits a model, 40 comparisons in all, each through the real
``stats.compare_models``. ``science-demo-replicates.json.gz`` adds four pretraining replicates of continued (six
seeds each): split two against two, they are arms of one procedure. A comparison that ignores the seeds' spread (the example bootstrap alone) or takes its
few seeds' differences for a normal sample (a normal in place of the t) rejects too many of them.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from domainbert.report.paired import replicate_of
from domainbert.report.results import group_results
from domainbert.report.stats import compare_models
from studies.score_files import read_scores

SCORES = Path(__file__).resolve().parents[3] / "studies" / "scores" / "science-demo-6seeds.json.gz"


def null_splits(runs: list[dict]) -> list[tuple[list[dict], list[dict]]]:
    """Every split of one model's six runs into two arms of three (the first run always in arm A), B's seeds
    relabelled to A's in order."""
    runs = sorted(runs, key=lambda r: r["seed"])
    out = []
    for others in itertools.combinations(runs[1:], 2):
        a = [runs[0], *others]
        b = [r for r in runs if r not in a]
        out.append(([{**r, "model": "A"} for r in a],
                    [{**r, "model": "B", "seed": partner["seed"]} for r, partner in zip(b, a, strict=True)]))
    return out


def test_the_paired_comparison_rejects_true_nulls_of_real_seeds_no_more_often_than_chance():
    _, runs = read_scores(SCORES)
    p_values = []
    for model in ("base", "original", "continued", "control"):
        for a, b in null_splits([r for r in runs if r["model"] == model]):
            out = compare_models(a, b, n_samples=400, seed=len(p_values))
            assert out.design.paired and out.n_examples == 1952
            p_values.append(out.p_value)
    p = np.array(p_values)
    assert p.size == 40
    # Uniform p-values give 2 of 40 under 0.05 and 8 under 0.2; the splits share runs, so the counts scatter more
    # than a binomial's. A normal in place of the t, or the example bootstrap alone, exceeds both bounds.
    assert (p < 0.05).sum() <= 5
    assert (p < 0.2).sum() <= 12


def test_two_arms_made_of_one_arm_s_pretraining_replicates_are_never_near_significance():
    _, runs = read_scores(SCORES.with_name("science-demo-replicates.json.gz"))
    continued = group_results(runs)["science-terms-ner"]["continued"]
    reps = sorted({replicate_of(r) for r in continued})
    assert reps == [1, 2, 3, 4] and len(continued) == 24
    p_values = []
    for partner in reps[1:]:  # the three splits of four replicates into two arms of two
        sides = ([1, partner], [r for r in reps if r not in (1, partner)])
        a, b = ([{**r, "model": name, "replicate": side.index(replicate_of(r)) + 1}
                 for r in continued if replicate_of(r) in side] for name, side in zip("AB", sides, strict=True))
        out = compare_models(a, b, n_samples=400, seed=partner)
        assert out.design.pairing == "replicate" and out.design.df == 1
        p_values.append(out.p_value)
    # With one degree of freedom a side's two replicates say little: the t's wide tails keep each null far from
    # 0.05, where the example bootstrap alone, or a normal in place of the t, brings one of them near it.
    assert min(p_values) > 0.1
