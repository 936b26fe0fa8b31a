"""Recheck a study's tables from its committed per-run scores (``bench/scores/*.json.gz``), with no model.

    python bench/rescore.py bench/scores/science-demo-6seeds.json.gz [--seeds 1 2 3] [--pair continued control]

Prints JSON: per task and model the mean, sd and per-seed scores, and every comparison the report would make
over these runs (paired by seed where both models have the seeds; Holm over the page), through the report's
own code (``report.results.build_tables``). ``--pair A B`` adds that one comparison alone, uncorrected: a
preregistered claim. ``--seeds`` keeps only those seeds (the floor's seed 0 always).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from common import emit


def _row(c: dict[str, Any]) -> dict[str, Any]:
    keys = ("task", "model", "reference", "diff", "ci_low", "ci_high", "fw_low", "fw_high", "p_value", "p_holm",
            "verdict", "paired", "units", "seed_correlation", "se", "df", "detectable", "n_samples")
    return {k: c.get(k) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path)
    parser.add_argument("--seeds", type=int, nargs="*")
    parser.add_argument("--pair", nargs=2, metavar=("A", "B"))
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    from domainbert.report.results import build_tables, default_compare_fn, group_results
    from domainbert.report.score_files import read_scores
    from domainbert.report.stats import compare_models

    about, runs = read_scores(args.scores)
    if args.seeds:
        runs = [r for r in runs if r["seed"] in args.seeds or r["model"] == "floor"]
    arms = [m for m in ("continued", "extended", "scratch", "tapt", "dapt-tapt", "curated-tapt", "control")
            if any(r["model"] == m for r in runs)]
    scores, comparisons = build_tables(runs, [], arms, [], default_compare_fn(args.samples, 0.95, 0), 0.95)
    out: dict[str, Any] = {
        "scores_file": str(args.scores),
        "about": about,
        "scores": [{k: s[k] for k in ("task", "model", "n_seeds", "mean", "std", "values", "collapsed")}
                   for s in scores],
        "comparisons": [_row(c) for c in comparisons],
    }
    if args.pair:
        grouped = group_results(runs)
        out["claim"] = [
            {k: v for k, v in compare_models(by[args.pair[0]], by[args.pair[1]], n_samples=args.samples).items()
             if k in ("task", "diff", "low", "high", "p_value", "paired", "units", "seed_correlation", "se", "df",
                      "per_seed", "n_samples")}
            for by in grouped.values() if args.pair[0] in by and args.pair[1] in by
        ]
    emit(out, f"rescore-{args.scores.name.split('.')[0]}")


if __name__ == "__main__":
    main()
