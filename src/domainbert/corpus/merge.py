"""The serial end of a corpus build: deduplication across every processed shard, the split into train and
validation, the output shards, the leakage audit, the manifest, the reports and the dataset card.

What runs per shard (cleaning, filtering, decontamination, hashing) is ``shards.py``'s; how a build starts,
resumes and finishes atomically is ``build.py``'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from domainbert.cards.finetuned_and_corpus import dataset_card
from domainbert.core.artifact_types import CorpusManifest, validate_artifact
from domainbert.core.artifacts import write_json_atomic
from domainbert.core.errors import DataError
from domainbert.corpus import drop_samples, report
from domainbert.corpus.audit import LeakAudit, audit_section
from domainbert.corpus.decontaminate import EvalSets
from domainbert.corpus.dedup import (
    SignatureStore,
    exact_first_mask,
    lsh_params,
    near_duplicate_mask,
    state_bytes_per_doc,
)
from domainbert.corpus.shards import PROCESSED, shard_name
from domainbert.corpus.store import SCHEMA, SPLITS, read_work_table, write_table

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
from dataclasses import dataclass, field

from domainbert.config.corpus import CorpusConfig

log = logging.getLogger(__name__)
EVAL_TEXTS = "eval-texts.json"  # written by build.prepare

TOKENS_PER_WORD = 1.3


TOKENS_METHOD = (
    "whitespace words x 1.3: BERT WordPiece splits English prose into about 1.3 pieces per word; "
    "the vocab stage measures the real fertility"
)


def _split_of(doc_id: str, seed: int, fraction: float) -> str:
    digest = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    return "validation" if int.from_bytes(digest, "little") / 2**64 < fraction else "train"


class _SplitWriter:
    """Buffers Arrow tables of one split and writes ``shard-NNNNN.parquet`` every ``size`` documents."""

    buffer: list[pa.Table]

    def __init__(self, folder: Path, size: int) -> None:
        self.folder, self.size, self.buffer, self.rows, self.count = folder, size, [], 0, 0

    def add(self, table: pa.Table) -> None:
        self.buffer.append(table)
        self.rows += table.num_rows
        while self.rows >= self.size:
            whole = pa.concat_tables(self.buffer)
            self._write(whole.slice(0, self.size))
            rest = whole.slice(self.size)
            self.buffer, self.rows = [rest], rest.num_rows

    def flush(self, force: bool = False) -> None:
        if self.rows or (force and self.count == 0):  # an empty split still gets one (empty) shard
            self._write(pa.concat_tables(self.buffer) if self.rows else SCHEMA.empty_table())
            self.buffer, self.rows = [], 0

    def _write(self, table: pa.Table) -> None:
        write_table(self.folder / f"{shard_name(self.count)}.parquet", table)
        self.count += 1


@dataclass
class _Kept:
    """Which processed documents survive deduplication, and how many each rule removed."""

    keep: np.ndarray
    exact_removed: int
    near_removed: int
    near_clusters: int


@dataclass
class _Written:
    """What writing the kept documents into their splits counted."""

    writers: dict[str, _SplitWriter]
    totals: dict[str, dict[str, int]]
    per_source: dict[str, dict[str, int]] = field(default_factory=dict)
    lengths: list[np.ndarray] = field(default_factory=list)


def merge(
    cfg: DomainConfig, work_dir: Path, out_dir: Path, shard_stats: list[dict[str, Any]], counts: dict[str, Any]
) -> dict[str, Any]:
    """Deduplicate across all processed shards, split, write output shards, manifest and reports.

    Args:
        cfg: the ``DomainConfig``.
        work_dir: the build's work folder with ``processed/``.
        out_dir: the (temporary) corpus folder to write.
        shard_stats: what ``process_input_shard`` returned, in shard order.
        counts: documents read per source and malformed lines (from ``iter_input_shards``).

    Returns:
        The manifest.
    """
    corpus = cfg.corpus
    read = counts.get("documents_in", {})
    if not sum(read.values()):  # nothing came in: no filter is to blame
        raise DataError(
            f"the corpus input is empty: no document was read from source(s) {', '.join(read) or 'none'} "
            f"(empty files? `domainbert validate` checks each source on a sample)",
            field="corpus.sources",
        )
    bases = [work_dir / PROCESSED / shard_name(s["index"]) for s in shard_stats]
    kept = _deduplicate(corpus, bases)
    sets = EvalSets(**json.loads((work_dir / EVAL_TEXTS).read_text()))
    decon = corpus.decontamination
    audit = LeakAudit(sets.texts, decon.ngram, decon.min_words) if decon.audit else None
    written = _write_splits(corpus, bases, kept.keep, out_dir, audit)
    if corpus.write_dropped:
        _collect_dropped(bases, out_dir / "dropped.jsonl.gz")
    lengths = np.concatenate(written.lengths)
    manifest = _manifest(cfg, shard_stats, counts, written, kept, lengths, work_dir)
    if audit is not None:
        log.info("corpus: leakage audit of %d evaluation texts took %.1f s", len(audit.texts), audit.seconds)
    manifest["audit"] = audit_section(audit, sets.sources, sets.not_checked, decon, work_dir / "audit.json")
    manifest["shards"] = {s: written.writers[s].count for s in SPLITS}
    manifest["content_hash"] = _shards_hash(out_dir)
    manifest = validate_artifact(CorpusManifest, manifest).model_dump(mode="json")
    write_json_atomic(out_dir / "manifest.json", manifest)
    report.write_reports(out_dir, manifest, lengths)
    (out_dir / "README.md").write_text(dataset_card(cfg, manifest))  # the Hub dataset card (``push`` rebuilds it)
    return manifest


def _deduplicate(corpus: CorpusConfig, bases: list[Path]) -> _Kept:
    """Exact, then near-duplicate verdicts over every processed shard's document keys and signatures."""
    keys = np.concatenate([np.load(b.with_suffix(".keys.npy")) for b in bases]) if bases else np.zeros(0, np.uint64)
    keep = exact_first_mask(keys) if corpus.dedup.exact else np.ones(len(keys), dtype=bool)
    exact_removed = int((~keep).sum())
    near_clusters = 0
    if corpus.dedup.near:
        before = keep
        keep, near_clusters = near_duplicate_mask(
            SignatureStore([b.with_suffix(".sig.npy") for b in bases]), keep, corpus.dedup
        )
        near_removed = int((before & ~keep).sum())
    else:
        near_removed = 0
    if not keep.any():
        raise DataError(
            "the corpus is empty after filtering, decontamination and deduplication "
            "(check the filters in corpus.filters)"
        )
    return _Kept(keep, exact_removed, near_removed, near_clusters)


def _write_splits(
    corpus: CorpusConfig, bases: list[Path], keep: np.ndarray, out_dir: Path, audit: LeakAudit | None
) -> _Written:
    """Write the kept documents of every processed shard into their split's output shards, counting them."""
    written = _Written(
        writers={s: _SplitWriter(out_dir / s, corpus.shard_documents) for s in SPLITS},
        totals={s: {"documents": 0, "words": 0, "bytes": 0} for s in SPLITS},
    )
    pos = 0
    for base in bases:
        words = np.load(base.with_suffix(".words.npy"))
        mask = keep[pos : pos + len(words)]
        pos += len(words)
        table = read_work_table(base.with_suffix(".arrow")).filter(pa.array(mask))
        if audit is not None:
            audit.add(table.column("id").to_pylist(), table.column("text").to_pylist())
        _add_table(corpus, written, table, words[mask])
    for w in written.writers.values():
        w.flush(force=True)
    return written


def _add_table(corpus: CorpusConfig, written: _Written, table: pa.Table, words: np.ndarray) -> None:
    """Count one shard's kept documents per source and split, and hand each split its rows."""
    written.lengths.append(words)
    is_val = np.array(
        [
            _split_of(i, corpus.seed, corpus.validation_fraction) == "validation"
            for i in table.column("id").to_pylist()
        ],
        dtype=bool,
    )
    nbytes = pc.binary_length(table.column("text")).to_numpy(zero_copy_only=False).astype(np.int64)
    names, source_of = np.unique(np.array(table.column("source").to_pylist(), dtype=object), return_inverse=True)
    for name, in_source in ((str(n), source_of == k) for k, n in enumerate(names)):
        bucket = written.per_source.setdefault(name, {"documents": 0, "words": 0, "bytes": 0})
        _count(bucket, in_source, words, nbytes)
    for split, in_split in (("train", ~is_val), ("validation", is_val)):
        _count(written.totals[split], in_split, words, nbytes)
        written.writers[split].add(table.filter(pa.array(in_split)))


def _count(bucket: dict[str, int], mask: np.ndarray, words: np.ndarray, nbytes: np.ndarray) -> None:
    bucket["documents"] += int(mask.sum())
    bucket["words"] += int(words[mask].sum())
    bucket["bytes"] += int(nbytes[mask].sum())


def _collect_dropped(bases: list[Path], path: Path) -> None:
    with open(path, "wb") as out:
        for base in bases:
            part = base.with_suffix(".dropped.jsonl.gz")
            if part.is_file():
                out.write(part.read_bytes())  # concatenated gzip members are one valid gzip stream


def _shards_hash(out_dir: Path) -> str:
    h = hashlib.sha256()
    for split in SPLITS:
        for path in sorted((out_dir / split).glob("shard-*.parquet")):
            h.update(f"{split}/{path.name}".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _with_tokens(d: dict[str, int]) -> dict[str, int]:
    return {**d, "estimated_tokens": round(d["words"] * TOKENS_PER_WORD)}


def _filter_counts(
    corpus: CorpusConfig, shard_stats: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]]]:
    """Drops per filter and reason, and decontamination removals per task split, summed over shards."""
    filters: dict[str, dict[str, Any]] = {f.name: {"dropped": 0, "reasons": {}} for f in corpus.filters}
    decon: dict[str, dict[str, int]] = {}
    for s in shard_stats:
        for name, reasons in s["filters"].items():
            for reason, n in reasons.items():
                filters[name]["reasons"][reason] = filters[name]["reasons"].get(reason, 0) + n
                filters[name]["dropped"] += n
        for owner, c in s["decontamination"].items():
            slot = decon.setdefault(owner, {"documents": 0, "sentences": 0})
            slot["documents"] += c["documents"]
            slot["sentences"] += c["sentences"]
    return filters, decon


def _dedup_section(corpus: CorpusConfig, kept: _Kept) -> dict[str, Any]:
    bands, rows = lsh_params(corpus.dedup) if corpus.dedup.near else (None, None)
    return {
        "exact_removed": kept.exact_removed,
        "near_removed": kept.near_removed,
        "near_clusters": kept.near_clusters,
        "threshold": corpus.dedup.threshold,
        "num_perm": corpus.dedup.num_perm,
        "ngram": corpus.dedup.ngram,
        "lsh_bands": bands,
        "lsh_rows": rows,
        "state_bytes_per_million_documents": (state_bytes_per_doc(bands) if bands else 16) * 1_000_000,
    }


def _decontamination_section(
    corpus: CorpusConfig, decon: dict[str, dict[str, int]], index_summary: dict[str, Any]
) -> dict[str, Any]:
    d = corpus.decontamination
    return {
        "enabled": d.enabled,
        "ngram": d.ngram,
        "rule": (
            f"drop a document when >= {d.max_overlap:.0%} of its "
            f"{d.ngram}-grams are in the evaluation index; otherwise cut the "
            "sentences holding a hit n-gram or any part of an evaluation text shorter than "
            f"{d.ngram} words found anywhere in the document; a text under "
            f"{d.min_words} words removes only a whole document equal to it"
        ),
        "index": index_summary,
        "documents_removed": sum(c["documents"] for c in decon.values()),
        "sentences_removed": sum(c["sentences"] for c in decon.values()),
        "by_task_split": decon,
    }


def _manifest(
    cfg: DomainConfig,
    shard_stats: list[dict[str, Any]],
    counts: dict[str, Any],
    written: _Written,
    kept: _Kept,
    lengths: np.ndarray,
    work_dir: Path,
) -> dict[str, Any]:
    corpus, totals = cfg.corpus, written.totals
    filters, decon = _filter_counts(corpus, shard_stats)
    documents_in = counts.get("documents_in", {})
    index_summary = json.loads((work_dir / "decontamination-index.json").read_text())
    all_docs = sum(t["documents"] for t in totals.values())
    return {
        "domain": cfg.name,
        "profile": cfg.profile,
        "documents_in": sum(documents_in.values()),
        "documents_out": all_docs,
        "documents": {**{s: totals[s]["documents"] for s in SPLITS}, "total": all_docs},
        "words": {**{s: totals[s]["words"] for s in SPLITS}, "total": sum(t["words"] for t in totals.values())},
        "bytes": {**{s: totals[s]["bytes"] for s in SPLITS}, "total": sum(t["bytes"] for t in totals.values())},
        "estimated_tokens": {s: round(totals[s]["words"] * TOKENS_PER_WORD) for s in SPLITS},
        "estimated_tokens_method": TOKENS_METHOD,
        "splits": {s: _with_tokens(totals[s]) for s in SPLITS},
        "sources": {
            name: _with_tokens(
                {
                    "documents_in": documents_in.get(name, 0),
                    **written.per_source.get(name, {"documents": 0, "words": 0, "bytes": 0}),
                }
            )
            for name in documents_in
        },
        "filters": filters,
        "filter_examples": drop_samples.merge(
            (st.get("drop_samples") for st in shard_stats), [f.name for f in corpus.filters]
        ),
        "dedup": _dedup_section(corpus, kept),
        "decontamination": _decontamination_section(corpus, decon, index_summary),
        "malformed_lines": counts.get("malformed_lines", {"total": 0, "by_source": {}}),
        "length_words": report.length_summary(lengths),
    }
