"""The parallel part of a corpus build: cutting the sources into input shards and processing one shard.

``iter_input_shards`` streams every source in YAML order and writes input shards of ``shard_documents``
documents (``input/shard-NNNNN.arrow``, Arrow IPC), yielding a small spec for each as soon as it is on disk, so
processing starts while reading goes on. ``process_input_shard`` is a plain function of
``(cfg, spec, work_dir)``: it cleans and filters the shard (``filters``), removes evaluation overlap
(``decontaminate``), computes the exact-duplicate key, MinHash signature and word count of every surviving
document and writes them next to the kept documents; a ``.json`` stats file written last marks the shard done.
It is what ``build_corpus`` runs in a process pool and what ``flows/`` maps as Prefect tasks. Deduplication
across shards happens afterwards in ``merge.merge``.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from domainbert.corpus import drop_samples
from domainbert.corpus.decontaminate import Decontaminator
from domainbert.corpus.filters import Pipeline, build_pipeline
from domainbert.corpus.hashing import MinHasher, exact_keys_and_word_counts
from domainbert.corpus.source_tables import iter_source_tables
from domainbert.corpus.sources import MalformedCounter
from domainbert.corpus.store import read_work_table, write_work_table
from domainbert.corpus.words import WordBatch, lower_words

if TYPE_CHECKING:
    from domainbert.config.corpus import CorpusConfig
    from domainbert.config.domain import DomainConfig

INPUT, PROCESSED = "input", "processed"
INDEX = "decontamination-index.npz"


def shard_name(index: int) -> str:
    return f"shard-{index:05d}"


def is_processed(work_dir: Path, index: int) -> bool:
    return (work_dir / PROCESSED / f"{shard_name(index)}.json").is_file()


def iter_input_shards(cfg: DomainConfig, work_dir: Path, counts: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Write input shards and yield ``{"index", "input"}`` for each; fills ``counts`` (documents read per
    source, malformed lines) as it goes. Shards already processed (a resumed build) are not rewritten.
    """
    corpus = cfg.corpus
    malformed = MalformedCounter(corpus.max_malformed_lines, corpus.max_document_bytes)
    counts.setdefault("documents_in", {})
    folder = work_dir / INPUT
    folder.mkdir(parents=True, exist_ok=True)
    index, pending, rows = 0, [], 0

    def flush(table: pa.Table) -> dict[str, Any]:
        path = folder / f"{shard_name(index)}.arrow"
        if not is_processed(work_dir, index):
            write_work_table(path, table)
        return {"index": index, "input": str(path.relative_to(work_dir))}

    for source in corpus.sources:
        counts["documents_in"][source.name] = 0
        for table in iter_source_tables(source, malformed):
            counts["documents_in"][source.name] += table.num_rows
            pending.append(table)
            rows += table.num_rows
            while rows >= corpus.shard_documents:
                whole = pa.concat_tables(pending)
                yield flush(whole.slice(0, corpus.shard_documents))
                index += 1
                rest = whole.slice(corpus.shard_documents)
                pending, rows = [rest], rest.num_rows
    if rows:
        yield flush(pa.concat_tables(pending))
    counts["malformed_lines"] = {"total": malformed.total, "by_source": malformed.by_source}


def process_input_shard(cfg: DomainConfig, shard_spec: dict[str, Any], work_dir: Path) -> dict[str, Any]:
    """Clean, filter and decontaminate one input shard and hash its survivors; returns the shard's stats.

    Args:
        cfg: the ``DomainConfig``.
        shard_spec: ``{"index", "input"}`` from ``iter_input_shards``.
        work_dir: the build's work folder (holds ``input/``, ``processed/`` and the decontamination index).

    Returns:
        ``{"index", "documents_in", "documents_kept", "filters", "decontamination", "drop_samples"}``; the same dict is
        saved as ``processed/shard-NNNNN.json`` (written last: its presence means the shard is done).
    """
    work_dir = Path(work_dir)
    index = int(shard_spec["index"])
    done = work_dir / PROCESSED / f"{shard_name(index)}.json"
    if done.is_file():
        return json.loads(done.read_text())
    corpus = cfg.corpus
    pipeline: Pipeline = build_pipeline(corpus.filters)
    decon = Decontaminator(work_dir / INDEX, corpus.decontamination) if corpus.decontamination.enabled else None
    table = read_work_table(work_dir / shard_spec["input"])
    originals = table.column("text").to_pylist()
    texts, reasons = pipeline.apply_batch(originals)
    # words of the filtered texts, reused for the documents decon leaves alone
    alive_words: WordBatch | None = None
    unchanged: dict[int, int] = {}
    cut: list[int] = []
    if decon is not None:
        alive_words, unchanged, cut = _decontaminate(pipeline, decon, texts, reasons)
    kept = [i for i, t in enumerate(texts) if t is not None]
    kept_list = [t for t in texts if t is not None]
    out = table.take(pa.array(kept, type=pa.int64())).set_column(1, "text", pa.array(kept_list, type=pa.string()))
    base = work_dir / PROCESSED / shard_name(index)
    base.parent.mkdir(parents=True, exist_ok=True)
    words = _kept_words(kept, kept_list, alive_words, unchanged) if corpus.dedup.near and kept else None
    _save_hashes(corpus, base, kept_list, words)
    write_work_table(base.with_suffix(".arrow"), out)
    if corpus.write_dropped:
        _write_dropped(base.with_suffix(".dropped.jsonl.gz"), table, texts, reasons, originals)
    stats = {
        "index": index,
        "documents_in": table.num_rows,
        "documents_kept": len(kept),
        "filters": pipeline.dropped,
        "decontamination": decon.removed if decon else {},
        "drop_samples": drop_samples.shard_sample(
            table.column("id").to_pylist(),
            table.column("source").to_pylist(),
            reasons,
            originals,
            set(cut) if decon is not None else None,
        ),
    }
    text = json.dumps(stats, sort_keys=True)
    tmp_json = done.with_suffix(".json.tmp")
    tmp_json.write_text(text)
    os.replace(tmp_json, done)
    # The record as stored, not as built: a resumed build reads it back from the file, and the two must be
    # equal down to key order (the report lists filters, reasons and samples in the order it meets them).
    return dict(json.loads(text))


def _save_hashes(corpus: CorpusConfig, base: Path, kept_list: list[str], words: WordBatch | None) -> None:
    """The kept documents' MinHash signatures (only when near dedup wants them), exact keys and word counts."""
    hasher = MinHasher(corpus.dedup.num_perm, corpus.dedup.ngram)
    if words is not None:  # given only when near dedup wants signatures, most of the hashing cost
        sigs = hasher.signatures(hasher.batch_shingles(words, kept_list))
    else:
        sigs = np.zeros((0, hasher.num_perm), dtype=np.uint32)
    _save_npy(base.with_suffix(".sig.npy"), sigs)
    keys, counts = exact_keys_and_word_counts(kept_list)
    _save_npy(base.with_suffix(".keys.npy"), keys)
    _save_npy(base.with_suffix(".words.npy"), counts)


def _decontaminate(
    pipeline: Pipeline, decon: Decontaminator, texts: list[str | None], reasons: list[str | None]
) -> tuple[WordBatch, dict[int, int], list[int]]:
    """Decontaminate the filtered texts in place (``texts``/``reasons``); a document that lost sentences goes
    through the filters again. Returns the filtered texts' words, which of them decontamination left alone
    (document index -> word-batch row) and the documents it cut."""
    alive = [i for i, t in enumerate(texts) if t is not None]
    alive_texts = [t for t in texts if t is not None]
    alive_words = lower_words(alive_texts)
    checked = decon.check_batch(alive_texts, alive_words)
    unchanged = {i: j for j, (i, text) in enumerate(zip(alive, checked, strict=True)) if text is texts[i]}
    cut, cut_texts = [], []
    for i, text in zip(alive, checked, strict=True):
        if text is None:
            texts[i], reasons[i] = None, "decontamination:overlap"
        elif text is not texts[i]:
            cut.append(i)  # sentences were cut: what is left must still pass the filters
            cut_texts.append(text)
        texts[i] = text
    again, again_reasons = pipeline.apply_batch(cut_texts) if cut else ([], [])
    for i, text, reason in zip(cut, again, again_reasons, strict=True):
        texts[i], reasons[i] = text, reason
    return alive_words, unchanged, cut


def _write_dropped(
    path: Path, table: pa.Table, texts: list[str | None], reasons: list[str | None], originals: list[str]
) -> None:
    """Every dropped document with its reason, as gzipped JSON lines (``corpus.write_dropped``)."""
    ids, sources = table.column("id").to_pylist(), table.column("source").to_pylist()
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.writelines(
            (
                json.dumps(
                    {"id": ids[i], "source": sources[i], "reason": reasons[i], "text": originals[i]},
                    ensure_ascii=False,
                )
                + "\n"
            ).encode()
            for i, t in enumerate(texts)
            if t is None
        )


def _kept_words(
    kept: list[int], kept_texts: list[str], alive_words: WordBatch | None, unchanged: dict[int, int]
) -> WordBatch:
    """``lower_words(kept_texts)``, taking the words of documents that decontamination left unchanged from
    ``alive_words`` (row ``unchanged[i]``) and splitting only the others."""
    if alive_words is None:
        return lower_words(kept_texts)
    reused = np.array([k for k, i in enumerate(kept) if i in unchanged], dtype=np.int64)
    fresh = np.setdiff1d(np.arange(len(kept)), reused)
    both = WordBatch.concat(
        [
            alive_words.take(np.array([unchanged[kept[k]] for k in reused], dtype=np.int64)),
            lower_words([kept_texts[k] for k in fresh]),
        ]
    )
    order = np.empty(len(kept), dtype=np.int64)  # kept document k is row order[k] of ``both``
    order[np.concatenate([reused, fresh])] = np.arange(len(kept))
    return both.take(order)


def _save_npy(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, array)
    os.replace(tmp, path)
