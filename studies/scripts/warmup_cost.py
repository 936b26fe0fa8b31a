"""What the base warm-up costs the encoder: the warmed-up base against the checkpoint it came from, per recipe.

    .venv/bin/python studies/scripts/warmup_cost.py science --seeds 1 2 3 4 5
    .venv/bin/python studies/scripts/warmup_cost.py science --seeds 1 2 3 4 5 --recipe shipped= \
        --recipe one-rate=pretrain.base_warmup.encoder_lr_scale=1 --recipe l2sp=pretrain.base_warmup.l2sp=1
    .venv/bin/python studies/scripts/warmup_cost.py science --quick     # a smoke check (CI): a 2-step warm-up, one seed, a few examples

A checkpoint without its masked-LM head is warmed up on general text before the arms (``pretrain.base_warmup``);
the warmed model is the ``base`` of every comparison, and the checkpoint itself (``original``) is fine-tuned
beside it as a second reference. This runs the warm-up once per recipe (``--recipe NAME=override[,override]``;
an empty list is the configured warm-up), each in its own run folder under ``--out`` (a rerun skips what is done),
fine-tunes the warmed base of each and the original once on the domain's tasks (whole test splits, the same
seeds), and prints and writes ``bench/results/warmup-cost-<domain>.json``: per recipe the warm-up's steps,
seconds and general and domain pseudo-perplexity, and per task base minus original (the report's seed-aware
bootstrap on the shared test examples), mean and sd of each. The issue's target: within 1 point of the original
on every task, general pseudo-perplexity at most 400. What it leaves out: the arms.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, set_offline_env, tiny_tasks  # noqa: E402


def runs_of(folder: Path, model: str, task: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "finetune" / model / task).glob("seed-*/result.json"))]


def base_minus_original(recipe: Path, original: Path, task: str, cfg: Any) -> dict[str, Any] | None:
    from domainbert.report.stats import compare_models

    base, orig = runs_of(recipe, "base", task), runs_of(original, "original", task)
    if not base or not orig:
        return None
    kw = {"n_samples": cfg.compare.bootstrap_samples, "confidence": cfg.compare.confidence, "seed": cfg.compare.seed}
    c = compare_models(base, orig, **kw).record()
    return {"task": task, "base": c["a"], "original": c["b"], **{k: c[k] for k in ("diff", "low", "high", "verdict")}}


def parse_recipes(values: list[str]) -> dict[str, list[str]]:
    recipes = {}
    for value in values:
        name, _, rest = value.partition("=")
        recipes[name] = [o for o in rest.split(",") if o]
    return recipes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="Fine-tuning seeds (default: config's).")
    parser.add_argument("--recipe", action="append", default=[], help="NAME=override[,override] (repeatable).")
    parser.add_argument("--override", action="append", default=[], help="More dotted.key=value overrides, every run.")
    parser.add_argument("--out", type=Path, default=None, help="Folder of the run folders.")
    parser.add_argument("--profile", default="offline", help="The domain's profile (default: offline).")
    parser.add_argument("--quick", action="store_true", help="Smoke check: a 2-step warm-up, one seed, one task of a few examples.")
    args = parser.parse_args()
    if args.quick:  # the figures mean nothing: it checks that the benchmark still runs
        args.seeds = args.seeds or [1]
        args.override += [
            "pretrain.base_warmup.steps=2",
            "finetune.epochs=0.1",
            "finetune.only_tasks=[science-subject]",
            "pretrain.eval_documents=8",
        ]
    set_offline_env()
    if args.quick:
        args.override += tiny_tasks(args.domain, args.override, args.profile, train=64, evaluate=32)
    from domainbert.core import logs

    logs.configure(logging.INFO)  # progress on stderr
    from domainbert.config.domain import load_domain
    from domainbert.core.errors import ConfigError

    recipes = parse_recipes(args.recipe or ["configured="])
    common = [*args.override, "pretrain.arms=[continued]", "finetune.save_models=none"]
    if args.seeds:
        common.append(f"finetune.seeds=[{', '.join(map(str, args.seeds))}]")
    try:
        plain = load_domain(args.domain, common, profile=args.profile)
        for extra in recipes.values():
            load_domain(args.domain, [*common, *extra], profile=args.profile)
    except ConfigError as exc:
        parser.error(str(exc))
    root = args.out or Path("runs") / f"warmup-cost-{plain.name}"
    out: dict[str, Any] = {}
    # stdout holds the JSON alone: a library's import-time notice (DeepSpeed's accelerator line) goes to stderr
    with contextlib.redirect_stdout(sys.stderr):
        run_recipes(args, recipes, common, plain, root, out)
    emit(
        {
            "benchmark": "warmup-cost",
            "domain": plain.name,
            "profile": args.profile,
            "revision": git_revision(),
            "machine": machine_info(),
            "overrides": common,
            "recipes": out,
        },
        f"warmup-cost-{plain.name}",
    )


def run_recipes(
    args: argparse.Namespace, recipes: dict[str, list[str]], common: list[str], plain: Any, root: Path, out: dict
) -> None:
    """Warm up, fine-tune and compare each recipe in its own run folder under ``root``, into ``out``."""
    from domainbert.config.domain import load_domain
    from domainbert.core.paths import RunLayout
    from domainbert.corpus.build import build_corpus
    from domainbert.finetune.matrix import finetune_all
    from domainbert.pretrain.base_warmup import ensure_base_warmup

    original_folder: Path | None = None
    for name, extra in recipes.items():
        # the original is the same model in every recipe: fine-tuned once, in the first recipe's folder
        only = "[base, original]" if original_folder is None else "[base]"
        cfg = load_domain(args.domain, [*common, *extra, f"finetune.only_models={only}"], profile=args.profile)
        layout = RunLayout(root / name)
        t0 = time.perf_counter()
        if original_folder is not None and not (layout.corpus / "manifest.json").is_file():
            shutil.copytree(original_folder / "corpus", layout.corpus)  # the same corpus: built once
        build_corpus(cfg, layout)  # the warm-up reports its domain perplexity on the corpus
        ensure_base_warmup(cfg, layout)
        finetune_all(cfg, layout)
        original_folder = original_folder or layout.root
        warm = json.loads((layout.root / "pretrain" / "base-warmup" / "summary.json").read_text())
        keys = ("steps", "wall_seconds", "general_perplexity", "domain_perplexity", "converged", "from_machine_cache")
        out[name] = {
            "overrides": extra,
            "seconds": round(time.perf_counter() - t0, 1),
            "warmup": {k: warm.get(k) for k in keys},
            "tasks": [
                c
                for t in plain.finetune.tasks
                if (c := base_minus_original(layout.root, original_folder, t.name, plain))
            ],
        }


if __name__ == "__main__":
    main()
