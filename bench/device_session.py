"""One prepared call for a lent GPU: the measurements owed to a device, in priority order, within one budget.

A lent machine comes with minutes, not hours, and ends when its time is spent. This script runs, each in its own
time slice of ``--budget-s`` (default 540 s, inside a lent machine's 10 minutes a command):

1. ``gpu-check``: bench/gpu_check.py with torch.compile on both sides, at 128 and 512 tokens, ZeRO-2 and torchrun,
   and NER fine-tuning against the ``run_ner.py`` Trainer recipe (the configurations in ``GPU_CONFIGS``'s order);
2. ``law-chunked``: law's classification task as configured and chunked (``finetune.pooling=mean``, the windows
   of studies/scripts/long_documents.py), the original checkpoint and the warmed base, against the floor, seed
   after seed while one more fits;
3. ``scratch-catch-up``: science's ``scratch-study`` profile with the from-scratch arm at the budget its own
   curve reaches continued's at (studies/03-from-scratch.md), paired with continued on both science tasks.

Each part writes ``<out>/<part>.json`` as it ends (and ``<out>/session.json`` after every part), so a lease that
ends early keeps what ran; run folders, logs and models go under ``--work``, so ``--out`` holds those four files.
A part whose slice cannot fit its least useful run is skipped with its reason; a failed part is recorded with its
error and the next one runs. Slices add up: time a part leaves unspent goes to the next. ``--cpu-smoke`` runs the
same code paths on a CPU with a 2-layer, 128-wide BERT, a few steps and one seed
(tests/system/bench/test_device_session.py). The JSON of the session goes to stdout (bench/common.emit).

What it leaves out: choosing what to measure (the parts are fixed), resuming a part a previous lease began
(rerunning it with the same ``--work`` reuses the run folders, which the pipeline resumes), and judging the
results: the study files do that.

Usage:
    python bench/device_session.py --out $OUT/device --budget-s 540
    python bench/device_session.py --cpu-smoke --out /tmp/device-smoke --work /tmp/device-smoke-work
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, git_revision, machine_info, set_offline_env  # noqa: E402
from device_session_parts import PARTS, Session, run_part  # noqa: E402

# Each part's share of the budget, and the fewest seconds in which it can still say something. The check first and
# largest: each compiled configuration costs about a minute, the compilation included.
SHARES = {"gpu-check": 0.50, "law-chunked": 0.25, "scratch-catch-up": 0.25}
MIN_SECONDS = {"gpu-check": 60.0, "law-chunked": 60.0, "scratch-catch-up": 60.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="Folder for the session's and each part's JSON alone.")
    p.add_argument(
        "--work",
        type=Path,
        default=Path(tempfile.gettempdir()) / "domainbert-device-session",
        help="Run folders, logs and models: kept out of --out, whose few files are what comes back from a lease.",
    )
    p.add_argument("--budget-s", type=float, default=540.0, help="Wall seconds for the whole session.")
    p.add_argument("--cpu-smoke", action="store_true", help="Tiny models, few steps, one seed, on the CPU.")
    p.add_argument("--parts", default=",".join(PARTS), help=f"Comma-separated subset of {', '.join(PARTS)}.")
    p.add_argument("--law-seeds", type=int, default=5, help="Most law seeds (run one after another while they fit).")
    p.add_argument(
        "--scratch-tokens",
        type=int,
        default=54_000_000,
        help="The from-scratch arm's budget: where its curve reaches continued's (studies/03-from-scratch.md).",
    )
    p.add_argument("--workers", type=int, default=None, help="domainbert run --workers (GPU 4; smoke 0, in-process).")
    args = p.parse_args(argv)
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        p.error(f"unknown part(s) {unknown}; choose from {list(PARTS)}")
    if args.workers is None:
        args.workers = 0 if args.cpu_smoke else 4
    if args.cpu_smoke:
        args.law_seeds = 1
    return args


def slice_ends(start: float, budget: float, parts: list[str]) -> dict[str, float]:
    """Each part's deadline: the budget split by the shares of the parts asked for, added up in order."""
    total = sum(SHARES[p] for p in parts)
    ends, acc = {}, 0.0
    for part in parts:
        acc += SHARES[part] / total
        ends[part] = start + budget * acc
    return ends


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    set_offline_env()
    start = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    session = Session(out=out, work=args.work.resolve(), smoke=args.cpu_smoke, args=args)
    head = {
        "benchmark": "device_session",
        "mode": "cpu-smoke" if args.cpu_smoke else "gpu",
        "git_commit": git_revision(),
        "budget_s": args.budget_s,
        "parts_asked": args.parts,
        "work": str(session.work),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "work")},
    }
    parts: dict[str, dict[str, Any]] = {}
    ends = slice_ends(start, args.budget_s, args.parts)
    # Libraries print to stdout on import: stdout carries the session's JSON alone.
    with contextlib.redirect_stdout(sys.stderr):
        for name in args.parts:
            allowance = min(ends[name], start + args.budget_s) - time.monotonic()
            print(f"[device_session] {name}: {allowance:.0f} s", file=sys.stderr, flush=True)
            parts[name] = run_part(name, session, allowance, MIN_SECONDS[name])
            (out / f"{name}.json").write_text(json.dumps(parts[name], indent=2, default=str) + "\n")
            _write_session(out, head, parts, start)
    report = _write_session(out, head, parts, start, machine=True)
    emit(report, "device_session", out / "session.json")
    return 0 if all(p["status"] != "failed" for p in parts.values()) else 1


def _write_session(
    out: Path, head: dict[str, Any], parts: dict[str, dict[str, Any]], start: float, machine: bool = False
) -> dict[str, Any]:
    report = {
        **head,
        "parts": {name: {k: part.get(k) for k in ("status", "reason", "seconds")} for name, part in parts.items()},
        "seconds_total": round(time.monotonic() - start, 1),
        **({"machine": machine_info()} if machine else {}),
    }
    (out / "session.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


if __name__ == "__main__":
    sys.exit(main())
