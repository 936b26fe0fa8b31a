"""Sequence-classification heads: does transformers' stock [CLS] head score like the mean-pooling head?

    .venv/bin/python studies/scripts/pooling.py science --seeds 1 2 3 4 5
    .venv/bin/python studies/scripts/pooling.py science --quick     # a smoke check (CI): no warm-up, one seed, a few examples
    .venv/bin/python studies/scripts/pooling.py science --seeds 1 2 3 4 5 --cls-override finetune.lr=3e-4  # a [CLS] recipe

The mean-pooling classifier (``finetune.pooling: mean``) is domainbert's own code, so a saved model needs
``trust_remote_code``; the stock ``*ForSequenceClassification`` head (``pooling: cls``, its pooler initialised
anew from the seed for every model) loads anywhere. This fine-tunes the domain's base model (the warmed-up
masked LM every comparison starts from, from the machine cache when it is there; the corpus is built for its
perplexities) twice, once per pooling,
through the fine-tuning stage on the domain's classification tasks only (the same examples, seeds and
settings; NER has no pooling), and prints and writes ``bench/results/pooling-<domain>.json``: per task the
mean and sd over seeds of each pooling, cls minus mean (the report's seed-aware bootstrap on the shared test
examples) and each against the floor. What it leaves out: the pretrained arms, NER, other poolings.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, set_offline_env, tiny_tasks  # noqa: E402

POOLINGS = ("mean", "cls")


def runs_of(folder: Path, model: str, task: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "finetune" / model / task).glob("seed-*/result.json"))]


def cls_vs_mean(folders: dict[str, Path], task: str, model: str, cfg: Any) -> dict[str, Any] | None:
    """cls minus mean for one model and task, seed-aware, on the same test examples; each beside the floor."""
    from domainbert.report.stats import compare_models

    sides = {p: [{**r, "model": f"{model}-{p}"} for r in runs_of(folders[p], model, task)] for p in POOLINGS}
    if not all(sides.values()):
        return None
    kw = {"n_samples": cfg.compare.bootstrap_samples, "confidence": cfg.compare.confidence, "seed": cfg.compare.seed}
    c = compare_models(sides["cls"], sides["mean"], **kw).record()
    floor = runs_of(folders["mean"], "floor", task)
    out = {
        "task": task,
        "model": model,
        "mean": c["b"],
        "cls": c["a"],
        "cls_minus_mean": {k: c[k] for k in ("diff", "low", "high", "verdict")},
    }
    if floor:
        for p in POOLINGS:
            f = compare_models(sides[p], floor, **kw).record()
            out[f"{p}_minus_floor"] = {k: f[k] for k in ("diff", "low", "high", "verdict")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="Fine-tuning seeds (default: config's).")
    parser.add_argument("--override", action="append", help="More dotted.key=value overrides.")
    parser.add_argument("--out", type=Path, default=None, help="Folder of the two run folders.")
    parser.add_argument("--profile", default="offline", help="The domain's profile (default: offline).")
    parser.add_argument(
        "--cls-override",
        action="append",
        default=[],
        help="Overrides for the [CLS] runs alone (a recipe for the stock head: finetune.lr=3e-4); the mean-pooling "
        "runs keep the configured recipe.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="Smoke check: no base warm-up (the packaged base as it is), one seed, a few examples a task.",
    )
    args = parser.parse_args()
    if args.quick:  # the figures mean nothing: it checks that the benchmark still runs
        args.seeds = args.seeds or [1]
        args.override = [*(args.override or []), "pretrain.base_warmup.enabled=off", "pretrain.eval_documents=8"]
    set_offline_env()
    if args.quick:
        args.override += tiny_tasks(args.domain, args.override, args.profile, train=64, evaluate=32)
    from domainbert.core import logs

    logs.configure(logging.INFO)  # progress on stderr
    from domainbert.config.domain import load_domain
    from domainbert.core.errors import ConfigError

    try:
        plain = load_domain(args.domain, list(args.override or []), profile=args.profile)
    except ConfigError as exc:
        parser.error(str(exc))
    tasks = [t.name for t in plain.finetune.tasks if t.type == "classification"]
    if not tasks:
        parser.error(f"{args.domain} has no classification task")
    common = [f"finetune.only_tasks={json.dumps(tasks)}", *(args.override or [])]
    if args.seeds:
        common.append(f"finetune.seeds=[{', '.join(map(str, args.seeds))}]")
    from domainbert.core.paths import RunLayout
    from domainbert.corpus.build import build_corpus
    from domainbert.finetune.matrix import finetune_all
    from domainbert.pretrain.base_warmup import ensure_base_warmup

    root = args.out or Path("runs") / f"pooling-{plain.name}"
    folders, seconds = {}, {}
    for pooling in POOLINGS:
        own = args.cls_override if pooling == "cls" else []
        overrides = [*common, *own, f"finetune.pooling={pooling}", "finetune.save_models=none"]
        cfg = load_domain(args.domain, overrides, profile=args.profile)
        folders[pooling] = root / pooling
        layout = RunLayout(folders[pooling])
        t0 = time.perf_counter()
        build_corpus(cfg, layout)  # the warm-up reports its domain perplexity on the corpus
        ensure_base_warmup(cfg, layout)  # the base of every comparison; no arm is trained here
        finetune_all(cfg, layout)
        seconds[pooling] = round(time.perf_counter() - t0, 1)
    models = ["base"]
    emit(
        {
            "benchmark": "pooling",
            "domain": plain.name,
            "profile": args.profile,
            "revision": git_revision(),
            "machine": machine_info(),
            "overrides": common,
            "cls_overrides": args.cls_override,
            "seconds": seconds,
            "run_folders": {p: str(f) for p, f in folders.items()},
            "comparisons": [c for t in tasks for m in models if (c := cls_vs_mean(folders, t, m, plain))],
        },
        f"pooling-{plain.name}",
    )


if __name__ == "__main__":
    main()
