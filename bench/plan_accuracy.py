"""``domainbert plan``'s time estimate against the times a finished run recorded, stage by stage.

    .venv/bin/python bench/plan_accuracy.py runs/science
    .venv/bin/python bench/plan_accuracy.py runs/warmup-cost-science/plain --domain science \
        --override finetune.only_tasks=[science-subject] --override "finetune.seeds=[1, 2, 3, 4, 5]"
    .venv/bin/python bench/plan_accuracy.py runs/science --no-calibrate   # the uncalibrated guess instead

The run's configuration is read back from its ``config.resolved.json`` (the domain file, profile and overrides
it was made with; ``--domain``/``--profile``/``--override`` for a folder without one, and ``--override`` appended
after the recorded ones, e.g. ``pretrain.precision=fp32``). Each stage the run recorded is then sized from the
record itself (an arm's and the warm-up's tokens from their ``summary.json``, one fine-tuning run per
``result.json``, floors left out) and timed by ``plan.estimate.estimate``, the code ``plan`` runs, here and now.
Real times: an arm's training steps (``summary.json`` ``wall_seconds``) and the arm's whole stage (first to last
record of its ``metrics.jsonl``: evaluations and checkpoints included); the warm-up's ``wall_seconds``; the sum of
the fine-tuning runs' ``wall_seconds`` divided by ``--workers`` (the runs the run trained side by side: a demo
made with ``--workers 2`` is compared with ``plan --workers 2``, whose probes step two runs at once). Prints and writes
``bench/results/plan-accuracy-<run>.json`` with ratio = estimate / real per stage and the probes' "how" lines.
The run's own load is not known; this machine's load now is recorded with the estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _span(metrics: Path) -> float | None:
    """Seconds from the first to the last record of an arm's metrics.jsonl."""
    try:
        times = [json.loads(line)["time"] for line in metrics.read_text(encoding="utf-8").splitlines() if line]
    except (OSError, ValueError, KeyError):
        return None
    stamps = [datetime.fromisoformat(t) for t in times]
    return (max(stamps) - min(stamps)).total_seconds() if stamps else None


def recorded_stages(run: Path, workers: int = 1) -> tuple[list[Any], dict[str, dict[str, float]]]:
    """The stages ``run`` recorded, as plan's ``StagePlan`` sized from the records, and their real seconds (the
    fine-tuning runs' summed over ``workers`` running side by side)."""
    from domainbert.plan.stage_plans import StagePlan
    from domainbert.pretrain.base_warmup import NAME as WARMUP

    plans, real = [], {}
    for folder in sorted((run / "pretrain").glob("*/")):
        summary = _read(folder / "summary.json")
        if not summary or "wall_seconds" not in summary:
            continue
        name = f"pretrain {folder.name}"
        if folder.name == WARMUP:
            plans.append(StagePlan(name, "will run", {"tokens": summary["tokens"], "train": summary["train"]}))
            real[name] = {"train": summary["wall_seconds"]}
        else:
            plans.append(StagePlan(name, "will run", {"tokens": summary["tokens_consumed"]}))
            real[name] = {"train": summary["wall_seconds"]}
            span = _span(folder / "metrics.jsonl")
            if span:
                real[name]["stage"] = span
    runs = [_read(p) for p in sorted((run / "finetune").glob("*/*/seed-*/result.json"))]
    runs = [r for r in runs if r and r.get("mode") != "floor" and "wall_seconds" in r]
    tasks = [r["task"] for r in runs]
    # a run that validated once (stopped at the reference's step, or a one-epoch schedule): estimated so
    once = [len(r.get("history", [])) == 1 for r in runs]
    plans.append(StagePlan("finetune", "will run", {"todo_tasks": tasks, "todo_validate_once": once}))
    if runs:
        real["finetune"] = {"stage": sum(r["wall_seconds"] for r in runs) / workers, "runs": len(runs)}
    return plans, real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="A finished (or partly finished) run folder.")
    parser.add_argument("--domain", help="The domain, where the folder has no config.resolved.json.")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--override", action="append", default=[], help="dotted.key=value, after the recorded ones.")
    parser.add_argument("--workers", type=int, default=1, help="Fine-tuning runs the run trained side by side.")
    parser.add_argument("--no-calibrate", action="store_true", help="The uncalibrated guess instead of probes.")
    parser.add_argument("--emulated", default=None, help="A note on an emulated machine (e.g. ATEN_CPU_CAPABILITY).")
    args = parser.parse_args()
    common.set_offline_env()
    from domainbert.config.domain import DEFAULT_PROFILE, load_domain
    from domainbert.plan.estimate import estimate

    recorded = _read(args.run / "config.resolved.json") or {}
    domain = args.domain or recorded.get("domain_file")
    if not domain:
        parser.error(f"{args.run} has no config.resolved.json: name its --domain")
    overrides = [*recorded.get("overrides", []), *args.override]
    cfg = load_domain(domain, overrides, args.profile or recorded.get("profile") or DEFAULT_PROFILE)
    plans, real = recorded_stages(args.run, args.workers)
    timed = estimate(cfg, plans, workers=args.workers, calibrate=not args.no_calibrate)
    if timed is None:
        parser.error(f"the base model {cfg.base_model.name_or_path} is not reachable from here")
    rows = []
    for name, seconds in timed.seconds.items():
        for kind, value in real.get(name, {}).items():
            if kind == "runs":
                continue
            rows.append(
                {
                    "stage": name,
                    "real": kind,
                    "estimate_s": round(seconds, 1),
                    "real_s": round(value, 1),
                    "ratio": round(seconds / value, 2) if value else None,
                }
            )
    result = {
        "run": str(args.run),
        "domain": str(domain),
        "overrides": overrides,
        "calibrated": timed.calibrated,
        "how": timed.how,
        "emulated": args.emulated,
        "finetune_runs": real.get("finetune", {}).get("runs", 0),
        "workers": args.workers,
        "stages": rows,
        "git": common.git_revision(),
        "machine": common.machine_info(),
    }
    common.emit(result, f"plan-accuracy-{args.run.resolve().name}")


if __name__ == "__main__":
    main()
