"""A task's fine-tuning recipe chosen on validation: a grid of settings, one model, validation scores only.

    .venv/bin/python studies/scripts/recipe_sweep.py law --task law-license-category \
        --grid lr=1e-4,3e-4 --grid class_weights=none,balanced --grid max_length=64,128 --set epochs=10
    .venv/bin/python studies/scripts/recipe_sweep.py law --task law-license-category --grid lr=3e-4 --quick  # smoke check

Every combination of the ``--grid`` values (task settings: ``lr``, ``epochs``, ``class_weights``, ``chunks``;
``finetune`` settings: ``max_length``, ``batch_size``, ``pooling``, ``early_stopping_patience``) fine-tunes
``--model`` (default: the domain's configured checkpoint, the report's ``original``) through the stage's own
``run_finetune`` under ``--seeds``, and ranks the combinations by their mean validation score (the task's
primary metric, of the weights early stopping kept). The test split is scored by the same call, but never
printed or written: a recipe chosen here has not seen it. Prints and writes
``bench/results/recipe-<domain>-<task>.json``: per combination its validation score per seed, mean, best epoch
and wall time. What it leaves out: the other models (a comparison gives all of them the recipe chosen on this
one), the floor (``domainbert finetune``), the test scores.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, set_offline_env  # noqa: E402

TASK_KEYS = ("lr", "epochs", "class_weights", "chunks")
FINETUNE_KEYS = ("max_length", "batch_size", "pooling", "early_stopping_patience")


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    grid = {}
    for item in items:
        key, _, values = item.partition("=")
        if key not in TASK_KEYS + FINETUNE_KEYS or not values:
            raise SystemExit(
                f"error: --grid/--set {item!r}: expected KEY=v1,v2 with KEY one of {TASK_KEYS + FINETUNE_KEYS}"
            )
        grid[key] = [_value(v) for v in values.split(",")]
    return grid


def run_one(cfg: Any, task_name: str, model_ref: str, point: dict[str, Any], seed: int) -> dict[str, Any]:
    """One fine-tuning run under ``point``; its validation figures (the test's are dropped here)."""
    from domainbert.finetune.jobs import load_task_data, task_config
    from domainbert.finetune.runner import PRIMARY, run_finetune
    from domainbert.finetune.stage import settings_for

    task = task_config(cfg, task_name).model_copy(update={k: v for k, v in point.items() if k in TASK_KEYS})
    # a sweep compares recipes on validation, so each of its runs stops on its own validation, whatever the
    # profile's early_stopping (under reference, settings_for would refuse a run before the reference's choice)
    update = {k: v for k, v in point.items() if k in FINETUNE_KEYS} | {"early_stopping": "each_run"}
    ft = cfg.finetune.model_copy(update=update)
    cfg = cfg.model_copy(update={"finetune": ft})
    data = load_task_data(cfg, task)
    settings = settings_for(cfg, seed, "finetune", task)
    started = time.perf_counter()
    out = run_finetune(data, model_ref, settings, ft.max_length, ft.pooling)
    primary = PRIMARY[task.type]
    return {
        "seed": seed,
        "validation": out["validation"][primary],
        "best_epoch": next(h["epoch"] for h in out["history"] if h["step"] == out["best_step"]),
        "epochs_run": out["history"][-1]["epoch"],
        "collapsed_on_validation": bool(out["collapse_validation"]["collapsed"]),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--task", required=True)
    parser.add_argument("--model", default=None, help="A model reference (default: the configured checkpoint).")
    parser.add_argument("--grid", action="append", default=[], help="KEY=v1,v2 (repeatable): values to try.")
    parser.add_argument("--set", action="append", default=[], help="KEY=v: one value for every combination.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--profile", default="offline")
    parser.add_argument("--quick", action="store_true", help="A smoke check: 32 training examples, one epoch.")
    args = parser.parse_args()
    set_offline_env()
    from domainbert.core import logs

    logs.configure(logging.WARNING)
    logging.getLogger("domainbert.finetune.trainer").setLevel(logging.INFO)  # each evaluation: the run's progress
    from domainbert.config.domain import load_domain

    cfg = load_domain(args.domain, [f"finetune.only_tasks=[{args.task}]"], profile=args.profile)
    model_ref = args.model or cfg.base_model.name_or_path
    grid, fixed = parse_grid(args.grid), {k: v[0] for k, v in parse_grid(args.set).items()}
    if args.quick:
        fixed.update(epochs=1)
        task = cfg.finetune.tasks[0].model_copy(update={"max_train_examples": 32, "max_eval_examples": 16})
        cfg = cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"tasks": [task]})})
    rows = []
    for values in itertools.product(*grid.values()):
        point = {**fixed, **dict(zip(grid, values, strict=True))}
        runs = [run_one(cfg, args.task, model_ref, point, seed) for seed in args.seeds]
        mean = sum(r["validation"] for r in runs) / len(runs)
        rows.append({"point": point, "validation_mean": round(mean, 4), "runs": runs})
        per_seed = ", ".join(f"{r['validation']:.3f}" for r in runs)
        print(f"{point}: validation {mean:.4f} ({per_seed})", flush=True)
    rows.sort(key=lambda r: -r["validation_mean"])
    emit(
        {
            "revision": git_revision(),
            "machine": machine_info(),
            "domain": args.domain,
            "profile": args.profile,
            "task": args.task,
            "model": model_ref,
            "seeds": args.seeds,
            "chosen": rows[0]["point"] if rows else None,
            "rows": rows,
        },
        f"recipe-{cfg.name}-{args.task}" + ("-quick" if args.quick else ""),
    )


if __name__ == "__main__":
    main()
