"""Recheck a study's tables from its committed per-run scores (``studies/scores/*.json.gz``), with no model.

    python studies/rescore.py studies/scores/science-demo-6seeds.json.gz [--seeds 1 2 3] [--pair continued control]
    python studies/rescore.py studies/scores/study-2-law.json.gz studies/scores/study-13-law-checkpoint.json.gz \
        --rename study-2-law.json.gz:base=original --rename study-13-law-checkpoint.json.gz:base=original

Several score files are read as one run (a study continued on another day): a run present in two of them
(the same task, model, seed and replicate, a refitted floor) is kept once where its test scores agree, and a
task scored on different test splits in two of them stops the command. ``--rename FILE:OLD=NEW`` names a
file's model otherwise (studies 2 and 13 ran the packaged checkpoint with no warm-up, where it is ``base``).

Prints JSON: per task and model the mean, sd and per-seed scores, and every comparison the report would make
over these runs (paired by seed where both models have the seeds; Holm over the page), through the report's
own code (``report.results.build_tables``). ``--pair A B`` (repeatable) adds that comparison on each task both
models ran: a preregistered claim, with its own p-value and, over every claim printed (pairs x tasks), Holm's
p (``p_holm``) and the smallest difference found with 80% power at Holm's first threshold (``detectable``). ``--seeds`` keeps only those seeds (the floor's seed 0 always). ``--table`` prints instead the score table a study
file carries (``studies/*.md``, checked by ``tests/unit/studies/test_study_tables.py``): per task and model the runs,
mean, sd and each run's score in points, nothing drawn at random.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit  # noqa: E402

ARMS = ("continued", "extended", "scratch", "tapt", "dapt-tapt", "curated-tapt", "control")


def _row(c: dict[str, Any]) -> dict[str, Any]:
    keys = ("task", "model", "reference", "diff", "ci_low", "ci_high", "fw_low", "fw_high", "p_value", "p_holm",
            "verdict", "paired", "units", "seed_correlation", "se", "df", "detectable", "n_samples")
    return {k: c.get(k) for k in keys}


def _renamed(runs: list[dict[str, Any]], path: Path, renames: list[str]) -> list[dict[str, Any]]:
    """``runs`` of the score file ``path`` with each ``FILE:OLD=NEW`` of it applied: model OLD and its pretraining
    replicates (``OLD@r2``, ...) become NEW and NEW's replicates."""
    for rename in renames:
        name, _, pair = rename.partition(":")
        old, _, new = pair.partition("=")
        if not (name and old and new):
            raise SystemExit(f"rescore: --rename {rename!r}: expected FILE:OLD=NEW")
        if name == path.name:
            runs = [_renamed_run(r, old, new) for r in runs]
    return runs


def _renamed_run(run: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    from domainbert.config.pretrain import replicate_name, split_replicate

    stem, replicate = split_replicate(run["model"])
    return {**run, "model": replicate_name(new, replicate)} if stem == old else run


def merged_runs(paths: list[Path], renames: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file's ``about`` and their runs as one list (see the module doc)."""
    from domainbert.core.errors import DataError
    from studies.score_files import read_scores

    abouts: list[dict[str, Any]] = []
    kept: dict[tuple[Any, ...], tuple[dict[str, Any], Path]] = {}
    test_sets: dict[str, tuple[Any, Path]] = {}
    for path in paths:
        try:
            about, runs = read_scores(path)
        except DataError as exc:
            raise SystemExit(f"rescore: {exc}") from None
        abouts.append({"file": path.name, **about})
        for run in _renamed(runs, path, renames):
            seen = test_sets.setdefault(run["task"], (run.get("test_set"), path))
            if seen[0] != run.get("test_set"):
                raise SystemExit(f"rescore: {run['task']} was scored on another test split in {path} than in {seen[1]}")
            key = (run["task"], run["model"], run["seed"], run.get("replicate", 1))
            if key in kept and kept[key][0]["test"] != run["test"]:
                raise SystemExit(f"rescore: {'/'.join(map(str, key))} scores differently in {path} and {kept[key][1]}")
            kept.setdefault(key, (run, path))
    return abouts, [run for run, _ in kept.values()]


def score_table(runs: list[dict[str, Any]]) -> str:
    """The score table of a study file: one row per task and model, in the report's order and metric."""
    from domainbert.report.results import (
        collapsed_runs,
        group_results,
        mean_std,
        model_order,
        primary_metric,
        test_score,
    )

    arms = [m for m in ARMS if any(r["model"] == m for r in runs)]
    lines = ["| task | model | runs | mean | sd | collapsed | each run (points, by replicate and seed) |",
             "|---|---|---:|---:|---:|---:|---|"]
    for task, by_model in sorted(group_results(runs).items()):
        for model in model_order(by_model, arms, []):
            model_runs = by_model[model]
            metric = primary_metric(model_runs[0])
            values = [100 * test_score(r, metric) for r in model_runs]
            mean, sd = mean_std(values)
            each = " ".join(f"{v:.1f}" for v in values)
            lines.append(f"| {task} | {model} | {len(values)} | {mean:.2f} | {sd:.2f} | {collapsed_runs(model_runs)} "
                         f"| {each} |")
    return "\n".join(lines)


CLAIM_KEYS = ("model_a", "model_b", "task", "diff", "low", "high", "p_value", "paired", "units", "seed_correlation",
              "se", "df", "per_seed", "n_samples")


def claims(runs: list[dict[str, Any]], pairs: list[list[str]], samples: int) -> list[dict[str, Any]]:
    """Each pair's comparison on every task both models ran, then Holm over all of them (``p_holm``) and the
    difference each detects with 80% power at Holm's first threshold over them (``detectable``)."""
    from domainbert.report.power import detectable_difference, holm
    from domainbert.report.results import group_results
    from domainbert.report.stats import compare_models

    found = []
    grouped = group_results(runs)
    for a, b in pairs:
        for by in grouped.values():
            if a in by and b in by:
                record = compare_models(by[a], by[b], n_samples=samples).record()
                found.append({k: record[k] for k in CLAIM_KEYS})
    adjusted = holm([c["p_value"] for c in found])
    for claim, p in zip(found, adjusted, strict=True):
        claim["p_holm"] = p
        claim["detectable"] = detectable_difference(claim["se"], claim["df"], 0.05, len(found))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path, nargs="+")
    parser.add_argument("--rename", action="append", default=[], metavar="FILE:OLD=NEW")
    parser.add_argument("--seeds", type=int, nargs="*")
    parser.add_argument("--pair", nargs=2, action="append", default=[], metavar=("A", "B"))
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--table", action="store_true", help="print the score table a study file carries")
    args = parser.parse_args()
    from domainbert.report.results import build_tables, default_compare_fn
    from domainbert.report.rows import tables_json

    abouts, runs = merged_runs(args.scores, args.rename)
    if args.seeds:
        runs = [r for r in runs if r["seed"] in args.seeds or r["model"] == "floor"]
    if args.table:
        print(score_table(runs))
        return
    arms = [m for m in ARMS if any(r["model"] == m for r in runs)]
    tables = tables_json(*build_tables(runs, [], arms, [], default_compare_fn(args.samples, 0.95, 0), 0.95))
    out: dict[str, Any] = {
        "scores_file": " ".join(map(str, args.scores)),
        "about": abouts[0] if len(abouts) == 1 else abouts,
        "scores": [{k: s[k] for k in ("task", "model", "n_seeds", "mean", "std", "values", "collapsed")}
                   for s in tables["scores"]],
        "comparisons": [_row(c) for c in tables["comparisons"]],
    }
    if args.pair:
        out["claim"] = claims(runs, args.pair, args.samples)
    emit(out, "rescore-" + "+".join(p.name.split(".")[0] for p in args.scores))


if __name__ == "__main__":
    main()
