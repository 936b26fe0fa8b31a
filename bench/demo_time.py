"""Wall time of the offline demo: ``domainbert run science`` (the whole pipeline through Prefect), end to end.

Runs the CLI as a subprocess in a fresh run folder (so nothing is skipped as up to date), captures its log,
and prints JSON with the total wall seconds and, per stage, the wall time of that stage's Prefect subflow
(parsed from the "Beginning subflow run ... for flow 'domainbert-<stage>'" / "Finished in state" log lines).
As a cross-check it lists every artifact's ``_domainbert.json`` ``finished_at`` (seconds after the start) and
the pretraining arms' own training seconds from their summary.json. It measures; it does not judge the
results of the run (the report does that).

Usage:
    python bench/demo_time.py                        # science, offline profile, fresh folder under bench/results/
    python bench/demo_time.py --domain law pretrain.max_steps=5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import OFFLINE_ENV, emit, git_revision, machine_info, peak_rss_mib, results_dir, run_pipeline  # noqa: E402

# "12:34:56.789 | INFO    | Flow run 'proud-fox' - Beginning subflow run 'proud-fox' for flow 'domainbert-corpus'"
LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \| \w+\s*\| (Flow|Task) run '([^']+)' - (.*)$")
BEGIN = re.compile(r"Beginning (?:sub)?flow run '([^']+)' for flow '([^']+)'")
FINISHED = re.compile(r"Finished in state (\w+)")
RECORD = "_domainbert.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("overrides", nargs="*", help="dotted.key=value overrides passed to domainbert run")
    p.add_argument("--domain", default="science")
    p.add_argument("--profile", default="offline")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="Run folder (must not exist; default bench/results/demo-runs/<domain>-<utc time>).")
    p.add_argument("--timeout", type=float, default=4 * 3600)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default bench/results/demo_time.json).")
    return p.parse_args(argv)


def parse_log(lines: list[str], start: datetime) -> dict[str, Any]:
    """Flow and task runs from Prefect's console log, as seconds after ``start`` (local clock of the log).

    Prefect prints times of day only; a time earlier than the previous line is taken to be past midnight.
    """
    flows: dict[str, dict[str, Any]] = {}
    tasks: list[dict[str, Any]] = []
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    last: datetime | None = None
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            continue
        hh, mm, ss, ms, kind, run_name, message = m.groups()
        when = day + timedelta(hours=int(hh), minutes=int(mm), seconds=int(ss), milliseconds=int(ms))
        if last is not None and when < last - timedelta(hours=1):
            day += timedelta(days=1)
            when += timedelta(days=1)
        last = when
        offset = round((when - start).total_seconds(), 3)
        if kind == "Flow" and (b := BEGIN.search(message)):
            flows[b.group(1)] = {"flow": b.group(2), "run": b.group(1), "begin_s": offset}
        elif kind == "Flow" and (f := FINISHED.search(message)) and run_name in flows:
            flows[run_name].update(end_s=offset, state=f.group(1),
                                   wall_s=round(offset - flows[run_name]["begin_s"], 3))
        elif kind == "Task" and (f := FINISHED.search(message)):
            tasks.append({"task_run": run_name, "finished_s": offset, "state": f.group(1)})
    return {"flows": list(flows.values()), "tasks": tasks}


def stage_walls(flows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Wall seconds per stage subflow (``domainbert-corpus`` -> ``corpus``), summed over repeated runs."""
    out: dict[str, float | None] = {}
    for f in flows:
        name = f["flow"].removeprefix("domainbert-")
        if f.get("wall_s") is not None:
            out[name] = round((out.get(name) or 0.0) + f["wall_s"], 3)
        else:
            out.setdefault(name, None)
    return out


def artifact_times(run_dir: Path, start_epoch: float) -> list[dict[str, Any]]:
    """Every complete artifact folder of the run with its finished_at as seconds after the start."""
    found = []
    for record in sorted(run_dir.rglob(RECORD)):
        try:
            data = json.loads(record.read_text())
            done = datetime.strptime(data["finished_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except (OSError, ValueError, KeyError, json.JSONDecodeError):
            continue
        found.append({"artifact": record.parent.relative_to(run_dir).as_posix(),
                      "finished_s": round(done.timestamp() - start_epoch, 1)})
    return sorted(found, key=lambda a: a["finished_s"])


def pretrain_summaries(run_dir: Path) -> dict[str, Any]:
    out = {}
    for path in sorted((run_dir / "pretrain").glob("*/summary.json")):
        s = json.loads(path.read_text())
        out[path.parent.name] = {k: s.get(k) for k in ("steps", "tokens_consumed", "wall_seconds", "real_tokens_per_s")}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_dir = (args.run_dir or results_dir() / "demo-runs" / f"{args.domain}-{stamp}").resolve()
    if run_dir.exists():
        raise SystemExit(f"{run_dir} exists; demo_time needs a fresh run folder")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = run_dir.parent / f"{run_dir.name}.log"
    cmd = [sys.executable, "-m", "domainbert.cli", "run", args.domain, *args.overrides,
           "--profile", args.profile, "--out", str(run_dir)]
    # A wide COLUMNS keeps rich from wrapping the Prefect log lines that parse_log reads.
    env = {**os.environ, **OFFLINE_ENV, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120", "COLUMNS": "1000"}
    print(f"[bench/demo_time] {' '.join(cmd)}  (log: {log_path})", file=sys.stderr, flush=True)

    start_local = datetime.now()
    start_epoch, t0 = time.time(), time.perf_counter()
    with open(log_path, "w") as log:
        returncode = run_pipeline(cmd, timeout=args.timeout, stdout=log, stderr=subprocess.STDOUT, env=env)
    total = round(time.perf_counter() - t0, 2)

    lines = log_path.read_text(errors="replace").splitlines()
    parsed = parse_log(lines, start_local)
    first_flow = min((f["begin_s"] for f in parsed["flows"]), default=None)
    result = {
        "benchmark": "demo_time",
        "command": cmd,
        "returncode": returncode,
        "timed_out": returncode is None,
        "total_wall_s": total,
        "stages_wall_s": stage_walls(parsed["flows"]),
        "startup_s": first_flow,  # process start, imports and the embedded Prefect API, up to the first flow
        "flow_runs": parsed["flows"],
        "task_runs": parsed["tasks"],
        "artifacts": artifact_times(run_dir, start_epoch) if run_dir.is_dir() else [],
        "pretrain_arms": pretrain_summaries(run_dir) if run_dir.is_dir() else {},
        "run_dir": str(run_dir),
        "log": str(log_path),
        "log_tail": lines[-15:] if returncode != 0 else [],
        "children_peak_rss_mib": peak_rss_mib(children=True),
        "machine": machine_info(),
        "git_revision": git_revision(),
    }
    emit(result, "demo_time", args.out)
    return 0 if returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
