"""Benchmark of the corpus stage: throughput and peak memory at two input sizes, against a naive baseline.

For each size (MB of JSONL text) it makes an input from the shipped corpora (documents assembled from
random sentences of all shipped corpora that overlap no evaluation text, so they are distinct; 2% of them
with an evaluation text inserted; then 10% exact copies and 10% near copies with one word changed), and measures, each in a fresh process:

* ``full``: the law-style filter stack (unicode, control chars, whitespace, min length, Gopher repetition,
  symbol ratio, language id) + exact + MinHash near dedup + decontamination against the law and science tasks
  + the leakage audit of the finished corpus;
* ``exact_only``: no filters, exact dedup only (no decontamination, no audit);
* ``baseline``: what a user might write: ``pandas.read_json(lines=True)`` of everything, ``drop_duplicates``
  on the text, one Parquet file.

Prints one JSON object (also ``bench/results/corpus_build.json``): MB/s, documents/s, wall seconds and peak
RSS (main process and largest worker) per size and mode, the ratios against the baseline, the machine and its
load average at the start and the end. Run: ``python bench/corpus_build.py --sizes 50 500``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import emit, git_revision, machine_info, set_offline_env  # noqa: E402

SHIPPED = ["science/foldoc.jsonl.gz", "law/licenses.jsonl.gz", "law/license-rules.jsonl.gz",
           "economics/reuters.jsonl.gz", "tweets/trump_tweets.jsonl.gz", "general/wordnet-glosses-00.jsonl.gz"]


CONTAMINATED = 0.02  # share of new documents that get one evaluation text inserted


def _sentence_pool(tmp: Path) -> tuple[list[str], list[str]]:
    """Sentences of the shipped corpora that overlap no evaluation text, and the evaluation texts.

    The benchmark's tasks are drawn from the same corpora (FOLDOC definitions, licences), so unfiltered
    sentences would make most documents contaminated, which no real corpus is; contamination is instead
    inserted at a known rate (``CONTAMINATED``), so decontamination has real but realistic work to do.
    """
    from domainbert.corpus.decontaminate import Decontaminator, build_index, eval_texts

    sentences: list[str] = []
    for name in SHIPPED:
        with gzip.open(ROOT / "corpora" / name, "rt") as f:
            for line in f:
                sentences += [s for s in re.split(r"(?<=[.!?])\s+|\n+", json.loads(line)["text"]) if len(s) > 20]
    cfg = _config(tmp / "unused.jsonl", "full")
    sets = eval_texts(cfg.finetune.tasks, list(cfg.corpus.decontamination.splits))
    build_index(sets.texts, cfg.corpus.decontamination, tmp / "index.npz")
    checked = Decontaminator(tmp / "index.npz", cfg.corpus.decontamination).check_batch(sentences)
    clean = [s for s, c in zip(sentences, checked, strict=True) if c is s]
    evals = [t for texts in sets.texts.values() for t in texts if len(t.split()) >= 8]
    return clean, evals


def make_input(path: Path, megabytes: float, seed: int = 0) -> int:
    """Write about ``megabytes`` MB of JSONL documents; returns the document count."""
    sentences, evals = _sentence_pool(path.parent)
    rng = random.Random(seed)
    target, written, n, recent = megabytes * 1e6, 0, 0, []
    with open(path, "w") as out:
        while written < target:
            roll = rng.random()
            if roll < 0.1 and recent:
                text = rng.choice(recent)
            elif roll < 0.2 and recent:
                words = rng.choice(recent).split()
                words[rng.randrange(len(words))] = "changed"
                text = " ".join(words)
            else:
                parts = [rng.choice(sentences) for _ in range(rng.randint(3, 12))]
                if rng.random() < CONTAMINATED:
                    parts.insert(rng.randrange(len(parts) + 1), rng.choice(evals))
                text = " ".join(parts)
                recent = (recent + [text])[-1000:]
            line = json.dumps({"id": f"d{n}", "text": text}) + "\n"
            out.write(line)
            written += len(line.encode())
            n += 1
    return n


def append_huge_document(path: Path, megabytes: float) -> None:
    """Append one document of about ``megabytes`` MB of ordinary words on a single line, written in pieces."""
    words = "the contract shall terminate upon written notice to the other party "
    with open(path, "a") as out:
        out.write('{"id": "huge", "text": "')
        for _ in range(int(megabytes * 1e6 / len(words))):
            out.write(words)
        out.write('"}\n')


def _config(data: Path, mode: str):
    from domainbert.config.domain import load_domain

    src = f"[{{type: local, name: bench, paths: [{data}], format: jsonl}}]"
    overrides = [f"corpus.sources={src}", "corpus.shard_documents=5000"]
    if mode == "exact_only":
        overrides += ["corpus.filters=[]", "corpus.dedup.near=false", "corpus.decontamination.enabled=false",
                      "corpus.decontamination.audit=false"]
    cfg = load_domain("law", overrides)
    science = load_domain("science")
    return cfg.model_copy(update={"finetune": cfg.finetune.model_copy(
        update={"tasks": [*cfg.finetune.tasks, *science.finetune.tasks]})})


def _own_peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM): ru_maxrss would carry the parent's peak over through fork and exec."""
    try:
        with open("/proc/self/status") as f:
            return round(next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024, 1)
    except (OSError, StopIteration):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_one(mode: str, data: Path, out: Path) -> dict:
    """One measurement in this process (called in a fresh subprocess)."""
    start = time.perf_counter()
    if mode == "baseline":
        import pandas as pd

        frame = pd.read_json(data, lines=True)
        frame = frame.drop_duplicates(subset="text")
        frame.to_parquet(out / "baseline.parquet")
        kept = len(frame)
    else:
        from domainbert.core.paths import RunLayout
        from domainbert.corpus.build import build_corpus

        kept = build_corpus(_config(data, mode), RunLayout(out))["documents_out"]
    wall = time.perf_counter() - start
    return {"wall_s": round(wall, 2), "kept": kept,
            "peak_rss_mb_main": _own_peak_rss_mb(),
            "peak_rss_mb_worker": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[50, 500], help="input sizes in MB")
    parser.add_argument("--modes", nargs="+", default=["full", "exact_only", "baseline"])
    parser.add_argument("--huge-document-mb", type=float, default=0,
                        help="also append one document (a single JSONL line) of this many MB: peak memory must not "
                             "grow with it (it is over corpus.max_document_bytes and skipped)")
    parser.add_argument("--one", nargs=3, metavar=("MODE", "DATA", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="Smoke check: 1 MB, the full stack and the baseline.")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.modes = [1.0], ["full", "baseline"]
    if args.one:
        print(json.dumps(run_one(args.one[0], Path(args.one[1]), Path(args.one[2]))))
        return
    set_offline_env()
    results: dict = {"machine": machine_info(), "revision": git_revision(), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="corpus-bench-") as tmp:
        for size in args.sizes:
            data = Path(tmp) / f"input-{size:g}MB.jsonl"
            docs = make_input(data, size)
            if args.huge_document_mb:
                append_huge_document(data, args.huge_document_mb)
            mb = data.stat().st_size / 1e6
            entry: dict = {"input_mb": round(mb, 1), "documents": docs, "huge_document_mb": args.huge_document_mb}
            for mode in args.modes:
                out = Path(tmp) / f"out-{size:g}-{mode}"
                out.mkdir()
                proc = subprocess.run([sys.executable, __file__, "--one", mode, str(data), str(out)],
                                      capture_output=True, text=True, check=True)
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                r["mb_per_s"] = round(mb / r["wall_s"], 2)
                r["docs_per_s"] = round(docs / r["wall_s"], 1)
                entry[mode] = r
                print(f"{size:g} MB {mode}: {r}", file=sys.stderr)
            if "baseline" in entry:
                for mode in ("full", "exact_only"):
                    if mode in entry:
                        entry[f"{mode}_vs_baseline_speed"] = round(entry[mode]["mb_per_s"] / entry["baseline"]["mb_per_s"], 3)
            results["sizes"][f"{size:g}"] = entry
    results["targets"] = {"full_mb_per_s": 3, "exact_only_mb_per_s": 20, "peak_rss": "flat between sizes"}
    results["machine"]["load_average_end"] = machine_info()["load_average"]
    emit(results, "corpus_build")


if __name__ == "__main__":
    main()
