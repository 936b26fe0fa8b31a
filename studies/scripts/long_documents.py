"""Long documents: does an encoder that reads the whole text (chunk and pool) reach the bag-of-words floor?

    .venv/bin/python studies/scripts/long_documents.py law --chunks 8 --seeds 1 2 3

One ``domainbert run DOMAIN`` in which every classification task is fine-tuned twice: as configured (each text cut
to ``finetune.max_length`` tokens) and as ``<task>-chunked`` (the same examples, each text's first ``--chunks``
windows of ``max_length`` tokens, each window encoded on its own and all of them mean-pooled: the task's
``chunks`` setting). The floor (TF-IDF + logistic regression) reads every word of every text in both.
Prints and writes ``bench/results/long-documents-<domain>.json``: per task the share of each test text the
encoder reads either way, per variant and model the mean and sd over seeds, the comparison with the floor (the report's own), and per model
the chunked variant minus the truncated one (the report's seed-aware bootstrap on the shared test examples).
What it leaves out: a longer ``max_length`` (one window of 512) and the 128 -> 512 schedule; the windows do not
overlap.
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

CHUNKED = "-chunked"


def variant_overrides(cfg: Any, chunks: int, args: argparse.Namespace) -> list[str]:
    """The domain's tasks plus a chunked copy of each classification task, the seeds and any more overrides;
    mean pooling for both copies, as chunk and pool needs it (one head for the two variants)."""
    tasks = [t.model_dump(mode="json", exclude_none=True) for t in cfg.finetune.tasks]
    chunked = [{**t, "name": t["name"] + CHUNKED, "chunks": chunks} for t in tasks if t["type"] == "classification"]
    out = ["finetune.only_tasks=null", f"finetune.tasks={json.dumps(tasks + chunked)}", "finetune.pooling=mean"]
    if args.seeds:
        out.append(f"finetune.seeds=[{', '.join(map(str, args.seeds))}]")
    return out + list(args.override or [])


def tokens_read(cfg: Any, task_name: str, chunks: int) -> dict[str, float]:
    """Per test text, in the base model's tokens: the median length, and the mean share an encoder reads when
    truncated to one window and when given ``chunks`` windows (special tokens left out)."""
    import numpy as np

    from domainbert.core.models import load_tokenizer
    from domainbert.finetune.jobs import task_config
    from domainbert.task_data.splits import load_task

    tok = load_tokenizer(cfg.base_model.name_or_path)
    texts = [ex.text for ex in load_task(task_config(cfg, task_name)).splits["test"]]
    lengths = np.array([len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]], dtype=float)
    body = cfg.finetune.max_length - tok.num_special_tokens_to_add()
    return {
        "median_tokens": float(np.median(lengths)),
        "read_truncated": float(np.mean(np.minimum(lengths, body) / np.maximum(lengths, 1))),
        "read_chunked": float(np.mean(np.minimum(lengths, chunks * body) / np.maximum(lengths, 1))),
    }


def chunked_vs_truncated(run: Path, task: str, models: list[str], cfg: Any) -> list[dict[str, Any]]:
    """Per model: the chunked variant's mean minus the truncated one's, seed-aware, on the same test examples."""
    from domainbert.report.stats import compare_models

    out = []
    for model in models:
        sides = []
        for name in (task + CHUNKED, task):
            found = sorted((run / "finetune" / model / name).glob("seed-*/result.json"))
            # the configured seeds only: a folder may hold runs of seeds an earlier invocation asked for
            runs = [r for r in (json.loads(p.read_text()) for p in found) if r["seed"] in cfg.finetune.seeds]
            sides.append([{**r, "task": task, "model": model + (CHUNKED if name != task else "")} for r in runs])
        if not (sides[0] and sides[1]):
            continue
        c = compare_models(
            *sides, n_samples=cfg.compare.bootstrap_samples, confidence=cfg.compare.confidence, seed=cfg.compare.seed
        ).record()
        out.append(
            {
                "model": model,
                "chunked": c["a"],
                "truncated": c["b"],
                "diff": c["diff"],
                "ci_low": c["low"],
                "ci_high": c["high"],
                "verdict": c["verdict"],
            }
        )
    return out


def summary(plain: Any, cfg: Any, overrides: list[str], out: Path, chunks: int, seconds: float) -> dict[str, Any]:
    """The study's record from a finished run folder: ``plain`` the domain as given, ``cfg`` with the variants."""
    tables = json.loads((out / "report" / "results.json").read_text())
    models = sorted({r["model"] for r in tables["scores"] if r["model"] != "floor"})
    tasks = [t.name for t in plain.finetune.tasks if t.type == "classification"]
    return {
        "benchmark": "long-documents",
        "domain": cfg.name,
        "revision": git_revision(),
        "machine": machine_info(),
        "overrides": overrides,
        "seconds": seconds,
        "run_folder": str(out),
        "chunks": chunks,
        "max_length": cfg.finetune.max_length,
        "scores": [r for r in tables["scores"] if r["task"] in tasks or r["task"].removesuffix(CHUNKED) in tasks],
        "vs_floor": [
            {k: c.get(k) for k in ("task", "model", "diff", "ci_low", "ci_high", "verdict")}
            for c in tables["comparisons"]
            if c["reference"] == "floor"
        ],
        "tokens_read": {t: tokens_read(cfg, t, chunks) for t in tasks},
        "chunked_minus_truncated": {t: chunked_vs_truncated(out, t, models, cfg) for t in tasks},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--chunks", type=int, default=8, help="Windows of finetune.max_length tokens per text.")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="Fine-tuning seeds (default: the config's)."
    )
    parser.add_argument("--override", action="append", help="More dotted.key=value overrides.")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    set_offline_env()
    from domainbert.config.domain import load_domain
    from domainbert.core.errors import ConfigError

    try:
        plain = load_domain(args.domain, list(args.override or []))
        overrides = variant_overrides(plain, args.chunks, args)
        cfg = load_domain(args.domain, overrides)
    except ConfigError as exc:
        parser.error(str(exc))
    out = args.out or Path("runs") / f"long-documents-{cfg.name}"
    cli = str(Path(sys.executable).with_name("domainbert"))
    t0 = time.perf_counter()
    cmd = [cli, "run", args.domain, *overrides, "--out", str(out), "--workers", str(args.workers)]
    if rc := run_pipeline(cmd):
        raise SystemExit(f"{' '.join(cmd)} exited {rc}")
    seconds = round(time.perf_counter() - t0, 1)
    emit(summary(plain, cfg, overrides, out, args.chunks, seconds), f"long-documents-{cfg.name}")


if __name__ == "__main__":
    main()
