"""Helpers shared by the benchmarks in bench/: timing, peak memory, machine facts, spread and JSON output.

Every benchmark prints one JSON document on stdout (and writes it under ``bench/results/``, which git
ignores), built from measured values only. This module holds no benchmark of its own and imports neither
torch nor transformers at module level, so a benchmark's parent process stays light.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = Path(os.environ.get("DOMAINBERT_BENCH_RESULTS", BENCH_DIR / "results"))  # tests redirect it
REPO_ROOT = BENCH_DIR.parent

# Offline and quiet: the benchmarks must never wait on the network or phone home.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "TOKENIZERS_PARALLELISM": "false",
}


def set_offline_env() -> None:
    """Apply ``OFFLINE_ENV`` to this process (keeps values the caller already set)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def domain_task_args(description: str) -> tuple[Any, Any]:
    """The arguments of a benchmark that reads one task of a domain (the domain, ``--task``, ``--profile`` and
    overrides as the CLI takes them, in any order), parsed, and the domain's config under them; the environment
    offline and the library's log at WARNING."""
    import argparse
    import logging

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--task", required=True)
    parser.add_argument("--profile", default="offline")
    parser.add_argument("overrides", nargs="*", help="Domain overrides, as the CLI takes them.")
    args = parser.parse_intermixed_args()  # overrides may follow --task
    set_offline_env()
    from domainbert.config.domain import load_domain
    from domainbert.core import logs

    logs.configure(logging.WARNING)
    return args, load_domain(args.domain, args.overrides, profile=args.profile)


def task_record(args: Any) -> dict[str, Any]:
    """The head of a per-task benchmark's JSON record: the commit, this machine, and what ``domain_task_args``
    parsed."""
    return {
        "revision": git_revision(),
        "machine": machine_info(),
        "domain": args.domain,
        "profile": args.profile,
        "task": args.task,
        "overrides": args.overrides,
    }


def tiny_tasks(domain: str, overrides: list[str], profile: str = "offline", train: int = 24,
               evaluate: int = 12) -> list[str]:
    """The override that cuts the domain's tasks (under ``overrides``) to a few examples and one epoch, with no
    retry of a collapsed run: a smoke run's fine-tuning, whose figures mean nothing."""
    from domainbert.config.domain import load_domain

    cfg = load_domain(domain, overrides, profile=profile)
    tiny = {"max_train_examples": train, "max_eval_examples": evaluate, "max_test_examples": evaluate, "epochs": 1}
    tasks = [{**t.model_dump(mode="json", exclude_none=True), **tiny} for t in cfg.finetune.tasks]
    return [f"finetune.tasks={json.dumps(tasks)}", "finetune.collapse_retry_lr_factor=null"]


def results_dir() -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    return RESULTS_DIR


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident memory of this process (or of its waited-for children) in MiB (Linux reports KiB)."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return round(resource.getrusage(who).ru_maxrss / 1024.0, 1)


class Stopwatch:
    """Named wall-clock intervals: ``with sw.time("load"): ...`` then ``sw.seconds`` -> {name: s}."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 4)


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and count of repeated measurements (None-safe: missing values are skipped)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": round(statistics.median(vals), 3), "min": round(min(vals), 3),
            "max": round(max(vals), 3), "n": len(vals)}


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on; the load average shows how busy a shared machine was."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        info["cpu_model"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                                 if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    for package in ("torch", "transformers", "tokenizers", "datasets", "accelerate", "deepspeed", "prefect"):
        try:
            info[f"{package}_version"] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return info


def git_revision() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def emit(result: dict[str, Any], name: str, out: Path | None = None) -> Path:
    """Print ``result`` as JSON on stdout and write it to ``out`` (default ``bench/results/<name>.json``)."""
    path = Path(out) if out else results_dir() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2, sort_keys=False, default=str)
    path.write_text(text + "\n")
    print(text, flush=True)
    return path


def run_pipeline(argv: list[str], timeout: float | None = None, **popen: Any) -> int | None:
    """Run a ``domainbert`` command as a child in this process group, wait for it and return its exit code;
    ``SystemExit`` with that code when it was stopped.

    A stop reaches the child as the user meant it: Ctrl-C in a terminal signals the whole group, so the child
    gets its own SIGINT, and this parent waits for its clean stop (one line, state saved, lock released)
    where ``subprocess.run`` would kill it a quarter of a second later; a SIGTERM sent to this parent alone is
    passed on to the child. A child still running 120 s after the stop is killed. Past ``timeout`` seconds the
    child is stopped the same way (SIGINT, then a kill after 120 s) and None is returned.
    """
    import signal

    env = {**os.environ, **OFFLINE_ENV, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
           **popen.pop("env", {})}
    proc = subprocess.Popen(argv, env=env, **popen)
    forward = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    try:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return None
        except KeyboardInterrupt:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise SystemExit(proc.returncode if proc.returncode and proc.returncode > 0 else 130) from None
    finally:
        signal.signal(signal.SIGTERM, forward)


def run_json_child(argv: list[str], out_json: Path, timeout: float | None = None,
                   env: dict[str, str] | None = None, log: Path | None = None) -> dict[str, Any]:
    """Run ``argv`` (a Python child that writes one JSON object to ``out_json``) and return that object.

    Each measurement runs in its own process so one contender's allocations, threads and caches do not
    leak into the next, and its peak RSS is its own. A failed child yields ``{"error": ...}`` with the
    tail of its output instead of stopping the whole benchmark.
    """
    out_json = Path(out_json)
    out_json.unlink(missing_ok=True)
    child_env = {**os.environ, **OFFLINE_ENV, **(env or {})}
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "process_wall_s": round(time.perf_counter() - start, 2)}
    wall = round(time.perf_counter() - start, 2)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0 or not out_json.is_file():
        tail = (proc.stderr or proc.stdout)[-2000:]
        return {"error": f"exit status {proc.returncode}", "output_tail": tail, "process_wall_s": wall}
    data = json.loads(out_json.read_text())
    data["process_wall_s"] = wall
    return data
