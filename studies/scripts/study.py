"""A domain at a study budget: every stage for real, then the figures a reviewer asks for, as JSON.

    .venv/bin/python studies/scripts/study.py science
    .venv/bin/python studies/scripts/study.py law --budget-tokens 400000 --seeds 1 2 3 4 5 --override pretrain.precision=bf16

Runs ``domainbert run`` (corpus, vocab, MLM-head warm-up and the pretraining arms, fine-tuning with floors on
``--workers`` processes, the report) into ``--out`` (default ``runs/study-<domain>``; finished stages are skipped on
a rerun), then prints and writes ``bench/results/study-<domain>.json``:
- per arm: domain and general perplexity before and after (the warmed-up base as "before" for the
  checkpoint-based arms), tokens, seconds;
- per task and model: mean ± sd over seeds, the interval and verdict against the base model and against the
  floor, collapsed runs;
- an A/A check on the real runs: the same model under different seeds, compared as if they were two models
  (``studies.aa.aa_check``): how often is "no true difference" called significant.
What it leaves out: timing comparisons with other tools (the other benchmarks do that).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, run_pipeline, set_offline_env  # noqa: E402


def study_overrides(args: argparse.Namespace) -> list[str]:
    out = [f"pretrain.budget_tokens={args.budget_tokens}", f"finetune.seeds=[{', '.join(map(str, args.seeds))}]",
           f"finetune.epochs={args.epochs}"]
    return out + list(args.override or [])


def arm_figures(arts: Any) -> dict[str, Any]:
    arms = {}
    for arm, s in arts.pretrain.items():
        arms[arm] = {k: s.get(k) for k in ("tokens_consumed", "steps", "lr", "start_head", "wall_seconds",
                                           "domain_perplexity_before", "domain_perplexity",
                                           "general_perplexity_before", "general_perplexity")}
    if arts.base_warmup:
        w = arts.base_warmup
        arms["base-warmup"] = {k: w.get(k) for k in ("steps", "tokens", "wall_seconds", "domain_perplexity_random_head",
                                                     "domain_perplexity", "general_perplexity_random_head",
                                                     "general_perplexity")}
    return arms


def task_figures(scores: list[dict], comparisons: list[dict]) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    for row in scores:
        entry = {"mean": row["mean"], "std": row["std"], "n_seeds": row["n_seeds"], "values": row["values"],
                 "collapsed": row.get("collapsed", 0), "retried": row.get("retried", 0)}
        for ref in ("base", "floor"):
            cmp = next((c for c in comparisons if c["task"] == row["task"] and c["model"] == row["model"]
                        and c["reference"] == ref), None)
            if cmp is not None:
                entry[f"vs_{ref}"] = {k: cmp.get(k) for k in ("diff", "ci_low", "ci_high", "verdict")}
        tasks.setdefault(row["task"], {"metric": row["metric"]})[row["model"]] = entry
    return tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--budget-tokens", type=int, default=600_000, help="Pretraining tokens per arm.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--override", action="append", help="More dotted.key=value overrides.")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=2, help="Fine-tuning processes (domainbert run --workers).")
    args = parser.parse_args()
    set_offline_env()

    from domainbert.config.domain import load_domain
    from domainbert.core.paths import RunLayout
    from domainbert.report.inputs import load_run
    from studies.aa import aa_check

    cfg = load_domain(args.domain, study_overrides(args))
    layout = RunLayout(args.out or Path("runs") / f"study-{cfg.name}")
    # The pipeline as a user runs it (Prefect, fine-tuning on --workers processes); finished stages are skipped.
    t0 = time.perf_counter()
    cli = str(Path(sys.executable).with_name("domainbert"))
    cmd = [cli, "run", args.domain, *study_overrides(args), "--out", str(layout.root), "--workers", str(args.workers)]
    if rc := run_pipeline(cmd):
        raise SystemExit(f"{' '.join(cmd)} exited {rc}")
    seconds = {"pipeline": round(time.perf_counter() - t0, 1)}

    tables = json.loads((layout.report / "results.json").read_text())
    arts = load_run(layout, list(cfg.pretrain.arms))
    models = [r for r in arts.finetune if r["model"] != "floor"]
    result = {
        "benchmark": "study", "domain": cfg.name, "revision": git_revision(), "machine": machine_info(),
        "overrides": study_overrides(args), "stage_seconds": seconds, "run_folder": str(layout.root),
        "arms": arm_figures(arts), "tasks": task_figures(tables["scores"], tables["comparisons"]),
        "collapsed_runs": sum(1 for r in models if r.get("collapsed")), "runs": len(models),
        # Collapsed runs (all zeros) would pool a seed spread of 0 into the other models' noise: left out.
        "aa_check": aa_check([r for r in models if not r.get("collapsed")], n_samples=cfg.compare.bootstrap_samples,
                             confidence=cfg.compare.confidence),
        "report": str(layout.report / "report.html"),
    }
    emit(result, f"study-{cfg.name}")


if __name__ == "__main__":
    main()
