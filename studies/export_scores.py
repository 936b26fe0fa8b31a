"""Write a finished run's fine-tuning results as a score file under ``studies/scores/`` (per-run scores, no model),
so that a clone rechecks the study's tables with ``studies/rescore.py``.

    python studies/export_scores.py runs/study-0-order4 studies/scores/study-0-manpages-fr-order4.json.gz \
        --study "0, the fourth design" --command "domainbert run ..." [--tasks manpages-fr-order] [--note "..."]

Reads the run as the report does (``report.inputs.finetune_results``: complete, undamaged results, collapse judged
by today's rule) and records what the study point was (``about``: the study, the run's domain and profile, the
commits the runs were made at (``run_revisions``, from each run's record; runs made before records held one are
counted as ``unrecorded``) and the one exported from (``revision``), the command, this machine's CPU); each run's
row says at which commit and when it finished (``made``). Prints the
file's path and the runs it holds as JSON. Trains nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import git_revision, machine_info  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run folder (its finetune/ results and config.resolved.json)")
    parser.add_argument("out", type=Path, help="the score file to write (.json.gz)")
    parser.add_argument("--study", required=True, help="which study point (its study file's name for it)")
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--tasks", nargs="*", help="only these tasks (default: every task with results)")
    parser.add_argument("--note", default="", help="anything a reader of the scores needs to know")
    args = parser.parse_args()
    from domainbert.core.artifacts import read_record
    from domainbert.core.paths import RunLayout
    from domainbert.report.inputs import finetune_results
    from studies.score_files import write_scores

    found = finetune_results(RunLayout(args.run))
    if args.tasks:
        found = [(path, r) for path, r in found if r["task"] in args.tasks]
    results = [r for _, r in found]
    records = [read_record(path.parent) or {} for path, _ in found]
    made = [{"revision": rec.get("source_revision"), "finished_at": rec.get("finished_at")} for rec in records]
    made_at = [m["revision"] for m in made]
    if not results:
        raise SystemExit(f"{args.run}: no finished fine-tuning result to export")
    resolved = args.run / "config.resolved.json"
    config = json.loads(resolved.read_text()) if resolved.is_file() else {}
    machine = machine_info()
    about = {
        "study": args.study,
        "domain": (config.get("config") or {}).get("name"),
        "profile": config.get("profile"),
        "overrides": config.get("overrides"),
        "run_revisions": sorted({rev for rev in made_at if rev}),
        "unrecorded": sum(rev is None for rev in made_at),
        "revision": git_revision(),
        "command": args.command,
        "machine": f"{machine.get('cpu_model')}, {machine.get('cpu_count')} cores",
        "note": args.note,
    }
    path = write_scores(results, args.out, about, made)
    print(json.dumps({"path": str(path), "runs": len(results), "tasks": sorted({r["task"] for r in results})}))


if __name__ == "__main__":
    main()
