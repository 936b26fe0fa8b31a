"""Budget curves: each arm's gain over the base model against pretraining tokens, with its 95% interval.

    .venv/bin/python studies/scripts/budget_curve.py science --budgets 65536 262144 786432 --tapt-epochs 8 32 100 --seeds 1 2 3 4
    .venv/bin/python studies/scripts/budget_curve.py science --tasks science-terms-ner science-subject --budgets 65536 262144 --tapt-epochs 4 16

One ``domainbert run`` per budget point, each in its own folder ``<out>/point-<k>`` (a rerun skips finished
stages): point k trains the corpus arms on ``--budgets[k]`` tokens and the TAPT arms for ``--tapt-epochs[k]``
passes over the task text (pair them so the two arms' tokens are close: the science task text is about 22,000
tokens). The base model, its warm-up (cached once per machine) and the floors are the same at every point.
``--tasks`` sets ``finetune.only_tasks`` (the science curve in studies/budget-curve.md is of science-terms-ner only).
Prints and writes ``bench/results/budget-<domain>.json``: per point, arm and task the tokens, the mean gain
over base (a fraction, as in results.json; the figure shows points), its interval and verdict (the report's own comparison: seed-aware bootstrap, bounded to the
metric's range), domain and general perplexity; per arm and task the smallest budget whose interval excludes 0
(None when no point's does), every verdict corrected with Holm over the whole curve (arms x references x tasks
x budgets); each arm is compared with the better reference of its task (base, or original after a warm-up) and
corpus arms with the equal-token control too; and ``bench/results/budget-<domain>.png``, the curves.
Base, original and the floors are the same models at every point: point 0's fine-tuning of them is copied into
each later point, whose stage skips them by their fingerprints (``--no-share``: train them again).
``--stages`` runs the stage commands (``domainbert corpus``, ``vocab``, ``pretrain``, ``finetune``, ``report``)
one after the other instead of ``domainbert run``: the same stages and artifacts, without Prefect, for a
machine that has no Prefect installed (a GPU node of a cluster image); fine-tuning runs one at a time.
What it leaves out: the learning-rate schedule is the arm's own at each budget (decayed to zero at its end),
so point k is not a checkpoint of point k+1's run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, results_dir, run_pipeline, set_offline_env  # noqa: E402


def point_overrides(args: argparse.Namespace, k: int) -> list[str]:
    out = [f"pretrain.budget_tokens={args.budgets[k]}", f"pretrain.tapt.epochs={args.tapt_epochs[k]}"]
    if args.seeds:
        out.append(f"finetune.seeds=[{', '.join(map(str, args.seeds))}]")
    if args.tasks:
        out.append(f"finetune.only_tasks=[{', '.join(args.tasks)}]")
    return list(args.override or []) + out


STAGES = ("corpus", "vocab", "pretrain", "finetune", "report")


def run_point(args: argparse.Namespace, k: int, run: Path) -> None:
    """One budget point: ``domainbert run``, or with ``--stages`` each stage command in turn."""
    cli = [sys.executable, "-m", "domainbert.cli"]
    common = [*point_overrides(args, k), "--out", str(run), "--profile", args.profile]
    if not args.stages:
        commands = [[*cli, "run", args.domain, *common, "--workers", str(args.workers)]]
    else:
        commands = [[*cli, stage, args.domain, *common] for stage in STAGES]
    for cmd in commands:
        if rc := run_pipeline(cmd):
            raise SystemExit(f"budget point {k} failed: {' '.join(cmd[2:])} exited {rc}")


def share_references(first: Path, run: Path) -> list[str]:
    """Copy point 0's fine-tuning of the models every point shares (base, original, the floors) into ``run``
    before it starts: the stage then finds them current by their fingerprints and skips them, where it would
    otherwise retrain identical runs (fine-tuning is deterministic). A copy whose fingerprint does not match
    (another base, other settings) is retrained like any stale result. Returns the models copied."""
    from domainbert.finetune.jobs import FLOOR, ORIGINAL

    copied = []
    for model in ("base", ORIGINAL, FLOOR):
        src, dst = first / "finetune" / model, run / "finetune" / model
        if src.is_dir() and not dst.exists():
            shutil.copytree(src, dst)
            copied.append(model)
    return copied


def point_figures(run: Path, arms: list[str]) -> dict[str, Any]:
    """Tokens and perplexities per arm, and every arm's comparison with the base per task, from one run."""
    tables = json.loads((run / "report" / "results.json").read_text())
    out: dict[str, Any] = {"arms": {}, "gains": []}
    for arm in arms:
        s = json.loads((run / "pretrain" / arm / "summary.json").read_text())
        out["arms"][arm] = {k: s.get(k) for k in ("tokens_consumed", "steps", "wall_seconds", "domain_perplexity_before",
                                                  "domain_perplexity", "general_perplexity_before",
                                                  "general_perplexity", "task_text_tokens", "tapt_epochs")}
    from domainbert.report.results import best_reference
    from domainbert.report.rows import score_from_json

    scores = [score_from_json(s) for s in tables["scores"]]
    # each arm against the better reference of its task (base, or the checkpoint before the warm-up), and the
    # corpus arms against the equal-token control: the curve's claims, corrected together in main()
    keys = ("task", "model", "reference", "metric", "diff", "ci_low", "ci_high", "p_value", "verdict", "collapsed")
    for c in tables["comparisons"]:
        if c["model"] in arms and c["reference"] in (best_reference(scores, c["task"]), "control"):
            out["gains"].append({k: c.get(k) for k in keys})
    return out


def correct_curve(points: list[dict], confidence: float) -> None:
    """Holm over every comparison of the curve (arms x references x tasks x budgets), in place."""
    from domainbert.report.rows import FAMILY_KEYS, comparison_from_json, comparison_json, holm_adjusted

    rows = [g for p in points for g in p["gains"]]
    for g in rows:
        g.pop("verdict_unadjusted", None)  # each point's report corrected over its own page only
    corrected = holm_adjusted([comparison_from_json(g, confidence) for g in rows], confidence)
    for g, row in zip(rows, corrected, strict=True):
        g.update({k: v for k, v in comparison_json(row).items() if k in FAMILY_KEYS})


def smallest_budgets(points: list[dict]) -> dict[str, Any]:
    """Per arm, reference and task: the fewest tokens at which the difference survives the curve's Holm
    correction (a gain, or a loss)."""
    found: dict[str, Any] = {}
    for p in sorted(points, key=lambda p: p["index"]):
        for g in p["gains"]:
            key = f"{g['model']} - {g['reference']} / {g['task']}"
            found.setdefault(key, None)
            tokens = p["arms"][g["model"]]["tokens_consumed"]
            if found[key] is None and g["verdict"] in ("better", "worse"):
                found[key] = {"tokens": tokens, "diff": g["diff"], "ci": [g["ci_low"], g["ci_high"]],
                              "p_holm": g.get("p_holm"), "direction": "gain" if g["verdict"] == "better" else "loss"}
    return found


def plot(points: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tasks = sorted({g["task"] for p in points for g in p["gains"]})
    fig = Figure(figsize=(5.5 * len(tasks), 4))
    FigureCanvasAgg(fig)
    for i, task in enumerate(tasks):
        ax = fig.add_subplot(1, len(tasks), i + 1)
        for arm in sorted({g["model"] for p in points for g in p["gains"]}):
            rows = [(p["arms"][arm]["tokens_consumed"], g) for p in points for g in p["gains"]
                    if g["task"] == task and g["model"] == arm and g["reference"] != "control"]
            if not rows:
                continue
            rows.sort(key=lambda r: r[0])
            xs = [r[0] for r in rows]
            ys = [100 * r[1]["diff"] for r in rows]  # the report's scale: points (x100)
            err = [[100 * (r[1]["diff"] - r[1]["ci_low"]) for r in rows],
                   [100 * (r[1]["ci_high"] - r[1]["diff"]) for r in rows]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=arm)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("pretraining tokens")
        ax.set_ylabel(f"gain over base ({rows[0][1]['metric'] if rows else 'score'} x100), 95% interval")
        ax.set_title(task)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--budgets", type=int, nargs="+", required=True, help="Corpus arms' tokens per point.")
    parser.add_argument("--tapt-epochs", type=float, nargs="+", required=True, help="TAPT passes per point.")
    parser.add_argument("--tasks", nargs="+", default=None, help="Only these tasks (default: all).")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="Fine-tuning seeds (default: the config's).")
    parser.add_argument("--override", action="append", help="More dotted.key=value overrides, every point.")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", default="offline", help="The domain's profile (default: offline).")
    parser.add_argument("--stages", action="store_true", help="Run the stage commands in turn, without Prefect.")
    parser.add_argument("--no-share", action="store_true",
                        help="Fine-tune base, original and the floors again at every point (default: reuse point 0's).")
    args = parser.parse_args()
    if len(args.budgets) != len(args.tapt_epochs):
        parser.error("--budgets and --tapt-epochs need one value per point")
    set_offline_env()
    from domainbert.config.domain import load_domain
    from domainbert.core.errors import ConfigError

    try:  # a misspelt task or key stops here, before point 0 trains anything
        cfg = load_domain(args.domain, point_overrides(args, 0), profile=args.profile)
    except ConfigError as exc:
        parser.error(str(exc))
    out = args.out or Path("runs") / f"budget-{cfg.name}"
    points = []
    for k in range(len(args.budgets)):
        run = out / f"point-{k}"
        t0 = time.perf_counter()
        if k > 0 and not args.no_share:
            print(f"point {k}: reusing point 0's {share_references(out / 'point-0', run)}", file=sys.stderr)
        run_point(args, k, run)
        point = {"index": k, "budget_tokens": args.budgets[k], "tapt_epochs": args.tapt_epochs[k],
                 "seconds": round(time.perf_counter() - t0, 1), "run_folder": str(run),
                 **point_figures(run, list(cfg.pretrain.arms))}
        points.append(point)
        print(json.dumps({"point": k, "gains": point["gains"]}), file=sys.stderr, flush=True)
    correct_curve(points, cfg.compare.confidence)
    png = results_dir() / f"budget-{cfg.name}.png"
    plot(points, png)
    emit({"benchmark": "budget-curve", "domain": cfg.name, "revision": git_revision(), "machine": machine_info(),
          "arms": list(cfg.pretrain.arms), "points": points, "smallest_budget": smallest_budgets(points),
          "figure": str(png)}, f"budget-{cfg.name}")


if __name__ == "__main__":
    main()
