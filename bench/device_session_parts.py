"""The parts of bench/device_session.py, each a function of its session and the seconds its slice allows.

- ``gpu-check``: bench/gpu_check.py as a child, torch.compile on (off in a smoke run: compiling on a CPU takes
  minutes), its own budget the slice's; its record embedded whole.
- ``law-chunked``: ``domainbert run law`` with studies/scripts/long_documents.py's variants (each classification
  task also as ``<task>-chunked``, mean pooling), the original checkpoint and the warmed base only; seed 1, then
  seeds 1-2 and so on in the same run folder (each run reuses what the last one finished), while the last
  seed's time fits in what is left; the study's record after each.
- ``scratch-catch-up``: ``domainbert run science --profile scratch-study`` with the from-scratch arm's budget
  raised, continued and scratch fine-tuned; scratch minus continued per task, paired by seed (the report's
  seed-aware bootstrap), and each arm's pretraining summary. A run stopped at its slice's end records the
  checkpoints it reached.

Every ``domainbert`` child is stopped as a user would stop it (bench/common.run_pipeline: SIGINT, state saved)
when its slice ends. What it leaves out: the orchestration (bench/device_session.py) and any verdict.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from common import BENCH_DIR, REPO_ROOT, run_pipeline, tiny_tasks

PARTS = ("gpu-check", "law-chunked", "scratch-catch-up")
# The headline ratio first, then the fine-tuning ratio no lease has measured yet, then 512, then the launchers.
GPU_CONFIGS = (
    "own-128,hf-group-texts-bf16-128,finetune-ner,own-512,hf-group-texts-bf16-512,deepspeed-zero2-128,torchrun-128"
)
LAW_MODELS = ["base", "original"]
SCIENCE_MODELS = ["continued", "scratch"]
CORPORA = REPO_ROOT / "corpora"
# A rerun's fixed cost beside its new fine-tuning runs: the temporary Prefect server, the stages' up-to-date checks.
RERUN_SECONDS = 30.0


@dataclass(frozen=True)
class Session:
    """Where a session writes, whether it is a smoke run, and its parsed arguments."""

    out: Path
    work: Path
    smoke: bool
    args: argparse.Namespace

    def domainbert(self) -> str:
        return str(Path(sys.executable).with_name("domainbert"))


def run_part(name: str, session: Session, allowance: float, min_seconds: float) -> dict[str, Any]:
    """One part, timed: skipped with its reason when the slice is under ``min_seconds``; an exception becomes
    a failed record (its last line and traceback tail) so the next part still runs."""
    head = {"part": name, "allowance_s": round(allowance, 1), "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if allowance < min_seconds:
        return {**head, "status": "skipped", "reason": f"{allowance:.0f} s left, under its {min_seconds:.0f} s least",
                "seconds": 0.0}
    t0 = time.monotonic()
    deadline = t0 + allowance
    try:
        record = PART_FUNCTIONS[name](session, deadline)
    except Exception as exc:  # a part's failure is data: the next part runs
        tail = traceback.format_exc().splitlines()[-12:]
        record = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500], "traceback_tail": tail}
    return {**head, "reason": None, **record, "seconds": round(time.monotonic() - t0, 1)}


# --- gpu-check ----------------------------------------------------------------------------------------------


def gpu_check(session: Session, deadline: float) -> dict[str, Any]:
    work = session.work / "gpu-check"
    work.mkdir(parents=True, exist_ok=True)
    record_path = work / "gpu_check.json"
    record_path.unlink(missing_ok=True)
    left = deadline - time.monotonic()
    argv = [sys.executable, str(BENCH_DIR / "gpu_check.py"), "--only", GPU_CONFIGS, "--budget-s", f"{left - 10:.0f}",
            "--out", str(record_path)]
    if session.smoke:
        argv += ["--cpu-smoke", "--peak-tflops", "1"]
    else:  # short windows: a lease holds this and two studies
        argv += ["--compile", "--seconds", "5", "--warmup-steps", "3", "--timeout", "120"]
    env = {"DOMAINBERT_BENCH_RESULTS": str(work)}
    with open(work / "gpu_check.log", "w") as log:
        rc = run_pipeline(argv, timeout=left, env=env, stdout=log, stderr=subprocess.STDOUT)
    if not record_path.is_file():
        return {"status": "failed", "reason": f"gpu_check.py wrote no record (exit {rc})", "log_tail": _tail(work)}
    record = json.loads(record_path.read_text())
    configs = record["configurations"]
    # a configuration the smoke mode leaves out by design is no shortfall; an error or a spent budget is
    left_out = {n: c["skipped"] for n, c in configs.items() if "--cpu-smoke" in c.get("skipped", "")}
    bad = {n: c.get("error_line") or c.get("skipped") for n, c in configs.items()
           if ("error" in c or "skipped" in c) and n not in left_out}
    return {
        "status": "done" if not bad else "partial",
        "reason": None if not bad else f"not measured: {bad}",
        "compile": not session.smoke,
        "configurations_run": [n for n in configs if n not in bad and n not in left_out],
        "left_out": left_out,
        "record": record,
    }


def _tail(folder: Path, name: str = "gpu_check.log", lines: int = 20) -> list[str]:
    path = folder / name
    return path.read_text(errors="replace").splitlines()[-lines:] if path.is_file() else []


# --- law-chunked --------------------------------------------------------------------------------------------


def law_chunked(session: Session, deadline: float) -> dict[str, Any]:
    sys.path.insert(0, str(REPO_ROOT / "studies" / "scripts"))
    import long_documents as study

    from domainbert.config.domain import load_domain

    smoke = session.smoke
    chunks = 2 if smoke else 8  # the study script's 8 windows; two show the path
    extra = ["pretrain.arms=[continued]", f"finetune.only_models={json.dumps(LAW_MODELS)}"]
    if smoke:
        extra += smoke_overrides(session, "law", ["law/licenses.jsonl.gz"])
    plain = load_domain("law", (extra + tiny_tasks("law", extra)) if smoke else extra)
    run_dir = session.work / "law-run"
    record: dict[str, Any] = {"status": "failed", "reason": "seed 1 did not finish", "chunks": chunks,
                              "models": LAW_MODELS, "run_folder": str(run_dir), "seeds_done": [], "seed_seconds": []}
    for last in range(1, session.args.law_seeds + 1):
        left = deadline - time.monotonic()
        if last > 1:
            need = RERUN_SECONDS + _seed_run_seconds(run_dir, last - 1) / max(1, session.args.workers)
            if left < 1.2 * need:
                record["reason"] = f"seed {last} left out: {left:.0f} s left, about {need:.0f} s needed"
                break
        seeds = list(range(1, last + 1))
        overrides = study.variant_overrides(plain, chunks, SimpleNamespace(seeds=seeds, override=extra))
        cfg = load_domain("law", overrides)
        t0 = time.monotonic()
        rc = _run(session, ["run", "law", *overrides, "--out", str(run_dir)], left, f"law-seeds-{last}")
        if rc != 0:
            record["reason"] = f"seeds {seeds}: " + ("stopped at the slice's end" if rc is None else f"exit {rc}")
            if rc is None and not record["seeds_done"]:
                record["status"] = "stopped"
            break
        record["seed_seconds"].append(round(time.monotonic() - t0, 1))
        record.update(status="done", reason=None, seeds_done=seeds,
                      record=study.summary(plain, cfg, overrides, run_dir, chunks, record["seed_seconds"][-1]))
        # written now too: a lease that ends during the next seed keeps this one
        interim = {"part": "law-chunked", **record}
        (session.out / "law-chunked.json").write_text(json.dumps(interim, indent=2, default=str) + "\n")
    if record["seeds_done"] and record["reason"]:
        record["status"] = "partial"
    return record


def _seed_run_seconds(run: Path, seed: int) -> float:
    """The wall seconds of one seed's fine-tuning runs, every model and variant (the floor's left out)."""
    found = [p for p in run.glob(f"finetune/*/*/seed-{seed}/result.json") if p.parts[-4] != "floor"]
    return sum(json.loads(p.read_text()).get("wall_seconds") or 0.0 for p in found)


# --- scratch-catch-up ---------------------------------------------------------------------------------------


def scratch_catch_up(session: Session, deadline: float) -> dict[str, Any]:
    from domainbert.config.domain import load_domain

    tokens = 8192 if session.smoke else session.args.scratch_tokens
    extra = [f"pretrain.arm_optim.scratch.budget_tokens={tokens}", f"finetune.only_models={json.dumps(SCIENCE_MODELS)}"]
    if session.smoke:
        extra += smoke_overrides(session, "science", ["science/foldoc.jsonl.gz"], profile="scratch-study")
        extra += ["pretrain.scratch_size=tiny", "pretrain.arm_optim.scratch.lr=5.0e-4"]
        extra += tiny_tasks("science", extra, profile="scratch-study")
    cfg = load_domain("science", extra, profile="scratch-study")
    run_dir = session.work / "science-run"
    argv = ["run", "science", "--profile", "scratch-study", *extra, "--out", str(run_dir)]
    rc = _run(session, argv, deadline - time.monotonic(), "science-scratch")
    record: dict[str, Any] = {
        "scratch_budget_tokens": cfg.pretrain.arm_budget("scratch"),
        "continued_budget_tokens": cfg.pretrain.arm_budget("continued"),
        "run_folder": str(run_dir),
        "pretrain": {arm: _arm_progress(run_dir, arm) for arm in SCIENCE_MODELS},
    }
    if rc != 0:
        reason = "stopped at the slice's end" if rc is None else f"domainbert run exited {rc}"
        return {**record, "status": "stopped" if rc is None else "failed", "reason": reason}
    tables = json.loads((run_dir / "report" / "results.json").read_text())
    tasks = [t.name for t in cfg.finetune.tasks]
    return {
        **record,
        "status": "done",
        "scores": [r for r in tables["scores"] if r["model"] in SCIENCE_MODELS + ["floor"]],
        "vs_floor": [
            {k: c.get(k) for k in ("task", "model", "diff", "ci_low", "ci_high", "verdict")}
            for c in tables["comparisons"]
            if c["reference"] == "floor"
        ],
        "scratch_minus_continued": {t: paired(run_dir, t, "scratch", "continued", cfg) for t in tasks},
    }


def paired(run: Path, task: str, a: str, b: str, cfg: Any) -> dict[str, Any] | None:
    """Model ``a`` minus model ``b`` on one task, over the configured seeds, paired where the seeds match."""
    from domainbert.report.stats import compare_models

    sides = []
    for model in (a, b):
        found = sorted((run / "finetune" / model / task).glob("seed-*/result.json"))
        sides.append([r for r in (json.loads(p.read_text()) for p in found) if r["seed"] in cfg.finetune.seeds])
    if not (sides[0] and sides[1]):
        return None
    c = compare_models(*sides, n_samples=cfg.compare.bootstrap_samples, confidence=cfg.compare.confidence,
                       seed=cfg.compare.seed).record()
    return {"a_model": a, "b_model": b, "a": c["a"], "b": c["b"], "diff": c["diff"], "ci_low": c["low"],
            "ci_high": c["high"], "verdict": c["verdict"], "seeds": len(sides[0])}


def _arm_progress(run: Path, arm: str) -> dict[str, Any]:
    """An arm's summary figures when it finished, else the newest checkpoint step it reached."""
    summaries = sorted((run / "pretrain").glob(f"{arm}*/**/summary.json")) if (run / "pretrain").is_dir() else []
    if summaries:
        s = json.loads(summaries[0].read_text())
        keep = ("steps", "budget_tokens", "tokens_consumed", "real_tokens_per_s", "domain_perplexity",
                "unigram_perplexity", "wall_seconds", "mfu", "precision")
        return {"finished": True, **{k: s.get(k) for k in keep}}
    steps = [int(p.name.split("-")[1]) for p in run.glob(f"pretrain/{arm}*/**/checkpoints/step-*") if p.is_dir()]
    return {"finished": False, "newest_checkpoint_step": max(steps, default=None)}


# --- shared -------------------------------------------------------------------------------------------------


def _run(session: Session, cli_args: list[str], timeout: float, log_name: str) -> int | None:
    """One ``domainbert`` command, its output in ``work/logs/<log_name>.log``; None when stopped at ``timeout``."""
    logs = session.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    argv = [session.domainbert(), *cli_args, "--workers", str(session.args.workers)]
    with open(logs / f"{log_name}.log", "w") as log:
        return run_pipeline(argv, timeout=max(timeout, 1.0), stdout=log, stderr=subprocess.STDOUT)


def smoke_overrides(session: Session, domain: str, corpus: list[str], profile: str = "offline") -> list[str]:
    """A domain at test sizes: a 2-layer, 128-wide BERT as the base (warmed up for two steps, so an ``original``
    exists), 200 documents, a vocabulary of 800, a few pretraining steps of 4 x 32 tokens."""
    from pretrain import prepare_model

    model = prepare_model(session.work, "tiny-bert")
    sources = [{"type": "local", "name": Path(p).name.split(".")[0], "paths": [str(CORPORA / p)], "format": "jsonl",
                "max_documents": 200} for p in corpus]
    return [
        f"base_model.name_or_path={model}",
        f"corpus.sources={json.dumps(sources)}",
        "tokenizer.vocab_size=800",
        "vocab.curve_sizes=[400, 800]",
        "pretrain.base_warmup={enabled: on, steps: 2, eval_every: 1, batch_size: 4, seq_len: 32}",
        "pretrain.budget_tokens=4096",
        "pretrain.max_steps=2",
        "pretrain.seq_len=32",
        "pretrain.batch_size=4",
        "pretrain.eval_every=1",
        "pretrain.checkpoint_every=1",
        "pretrain.eval_documents=8",
        "pretrain.precision=fp32",
        "finetune.seeds=[1]",
        "finetune.max_length=32",
        "finetune.batch_size=8",
        "finetune.torch_threads=1",
        "compare.bootstrap_samples=100",
    ]


PART_FUNCTIONS = {"gpu-check": gpu_check, "law-chunked": law_chunked, "scratch-catch-up": scratch_catch_up}
