"""The corpus stage: sources -> cleaned, filtered, decontaminated, deduplicated, split and sharded corpus.

Steps (each a plain function, so ``flows/`` can run them as Prefect tasks, mapping the middle one):

1. ``work_dir_for(cfg, layout)`` and ``prepare(cfg, work_dir)``: read the evaluation texts (through the fine-tuning
   task reader) and index them for decontamination;
2. ``split_inputs(cfg, work_dir)`` (or the streaming ``iter_input_shards``) and ``process_input_shard(cfg,
   spec, work_dir)`` (``shards``) for each spec: ``build_corpus`` runs them in a process pool of
   ``corpus.workers`` processes while the main process keeps reading the sources (a spawned pool: workers
   share nothing but the files); ``flows/`` may map them over Dask workers that see the same work folder;
3. ``finish(cfg, layout, work_dir, stats, counts)``: ``merge`` through ``atomic_output``: exact and near
   deduplication across all shards (``dedup``), the train/validation split by a hash of the document id,
   output shards of ``shard_documents`` documents, the leakage audit of every written document against the
   evaluation texts (``audit``: a text found verbatim fails the build unless
   ``corpus.decontamination.allow_leaks``), ``manifest.json`` and the reports.

Resumable: the work folder (``<run>/corpus.work/<fingerprint>``) keeps every processed shard with a stats file
written last; a restarted build re-reads the sources but skips the shards already done, and, everything being
deterministic, writes byte-identical output. The finished corpus goes through ``atomic_output``; a build whose
output is complete with the same fingerprint is skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.progress import Progress

from domainbert import __version__
from domainbert.core import plotting
from domainbert.core.artifact_types import CorpusManifest, validate_artifact
from domainbert.core.artifacts import atomic_output, fingerprint, is_complete, write_json_atomic
from domainbert.core.errors import DataError
from domainbert.corpus import drop_samples, report
from domainbert.corpus.audit import LeakAudit, audit_section
from domainbert.corpus.decontaminate import EvalSets, build_index, eval_texts
from domainbert.corpus.dedup import (
    SignatureStore,
    exact_first_mask,
    lsh_params,
    near_duplicate_mask,
    state_bytes_per_doc,
)
from domainbert.corpus.shards import INDEX, PROCESSED, is_processed, iter_input_shards, process_input_shard, shard_name
from domainbert.corpus.sources import input_fingerprint
from domainbert.corpus.store import SCHEMA, SPLITS, read_work_table, write_table
from domainbert.services.cards import dataset_card

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout

log = logging.getLogger(__name__)
# Bumped whenever the same inputs and config would give different output (hashing, filter behaviour), so a
# finished corpus or a half-done work folder of an older algorithm is rebuilt rather than reused.
ALGORITHM = 3
EVAL_TEXTS = "eval-texts.json"
TOKENS_PER_WORD = 1.3
TOKENS_METHOD = (
    "whitespace words x 1.3: BERT WordPiece splits English prose into about 1.3 pieces per word; "
    "the vocab stage measures the real fertility"
)


def stage_fingerprint(cfg: DomainConfig) -> str:
    """Fingerprint of the corpus config, the evaluation tasks it decontaminates against, the inputs and the
    version of the algorithm."""
    # Only what decontamination reads from a task (fine-tuning budgets must not trigger a corpus rebuild).
    tasks: list[object] = [
        [t.name, t.type, t.format, t.path, t.text_field, t.text_pair_field, t.tokens_field, t.hf_config_name]
        for t in cfg.finetune.tasks
    ]
    if _reads_eval_texts(cfg):
        tasks.append(
            sorted(
                f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                for t in cfg.finetune.tasks
                if Path(t.path).is_dir()
                for p in Path(t.path).iterdir()
                if p.is_file()
            )
        )
    return fingerprint(
        cfg.corpus.model_dump(mode="json"), tasks, input_fingerprint(cfg.corpus.sources), __version__, ALGORITHM
    )


def _reads_eval_texts(cfg: DomainConfig) -> bool:
    return cfg.corpus.decontamination.enabled or cfg.corpus.decontamination.audit


def prepare(cfg: DomainConfig, work_dir: Path) -> dict[str, Any]:
    """Read the evaluation texts into ``work_dir`` (for the audit) and build the decontamination index there;
    returns what was indexed per task/split."""
    decon = cfg.corpus.decontamination
    summary_path = work_dir / "decontamination-index.json"
    if summary_path.is_file() and (work_dir / EVAL_TEXTS).is_file():  # written last: a finished prepare
        return json.loads(summary_path.read_text())
    sets = eval_texts(cfg.finetune.tasks, list(decon.splits)) if _reads_eval_texts(cfg) else EvalSets()
    write_json_atomic(work_dir / EVAL_TEXTS, sets.__dict__)
    summary = build_index(sets.texts, decon, work_dir / INDEX) if decon.enabled else {}
    write_json_atomic(summary_path, summary)
    return summary


def build_corpus(cfg: DomainConfig, layout: RunLayout) -> dict[str, Any]:
    """Build the domain corpus into ``layout.corpus`` and return its manifest.

    Args:
        cfg: the ``DomainConfig`` (its ``corpus`` section and, for decontamination, ``finetune.tasks``).
        layout: the run's ``RunLayout``.

    Returns:
        The manifest (also saved as ``manifest.json``).

    Raises:
        DataError: unreadable or malformed input, or a corpus empty after filtering.
    """
    out = Path(layout.corpus)
    fp = stage_fingerprint(cfg)
    if is_complete(out, fp):
        log.info("corpus: skipped: up to date (%s)", out)
        return json.loads((out / "manifest.json").read_text())
    _remove_stale_temporaries(out)
    work_dir = work_dir_for(cfg, layout)
    log.info("corpus: building %s into %s (work folder %s)", cfg.name, out, work_dir)
    # matplotlib is slow to import; the main process mostly waits on the workers meanwhile
    threading.Thread(target=plotting.preload, daemon=True).start()
    prepare(cfg, work_dir)
    counts: dict[str, Any] = {}
    stats = _process_all(cfg, work_dir, counts)
    return finish(cfg, layout, work_dir, stats, counts)


def _remove_stale_temporaries(out: Path) -> None:
    """Remove ``corpus.tmp-<pid>`` folders left by builds killed during the merge (their pid is gone)."""
    for tmp in out.parent.glob(f"{out.name}.tmp-*"):
        try:
            os.kill(int(tmp.name.rsplit("-", 1)[1]), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:
            pass


def work_dir_for(cfg: DomainConfig, layout: RunLayout) -> Path:
    """The resumable work folder of this build (``<run>/corpus.work/<fingerprint prefix>``)."""
    work_dir = Path(layout.root) / "corpus.work" / stage_fingerprint(cfg)[:16]
    work_dir.mkdir(parents=True, exist_ok=True)
    return work_dir


def split_inputs(cfg: DomainConfig, work_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """All input shard specs and the read counts at once (for ``flows/``, which maps the specs)."""
    counts: dict[str, Any] = {}
    return list(iter_input_shards(cfg, work_dir, counts)), counts


def finish(
    cfg: DomainConfig, layout: RunLayout, work_dir: Path, stats: list[dict[str, Any]], counts: dict[str, Any]
) -> dict[str, Any]:
    """``merge`` into ``layout.corpus`` through ``atomic_output``, then remove the work folder.

    Args:
        cfg: the ``DomainConfig``.
        layout: the run's ``RunLayout``.
        work_dir: the work folder the shards were processed in.
        stats: ``process_input_shard`` results (any order).
        counts: the counts from ``split_inputs`` / ``iter_input_shards``.

    Returns:
        The manifest.
    """
    stats = sorted(stats, key=lambda s: s["index"])
    with atomic_output(
        Path(layout.corpus), config=cfg.corpus.model_dump(mode="json"), fp=stage_fingerprint(cfg)
    ) as tmp:
        manifest = merge(cfg, work_dir, tmp, stats, counts)
    shutil.rmtree(work_dir, ignore_errors=True)
    if not any(work_dir.parent.iterdir()):
        work_dir.parent.rmdir()
    log.info(
        "corpus: %d train / %d validation documents -> %s",
        manifest["documents"]["train"],
        manifest["documents"]["validation"],
        layout.corpus,
    )
    return manifest


def _process_all(cfg: DomainConfig, work_dir: Path, counts: dict[str, Any]) -> list[dict[str, Any]]:
    """Read the sources into input shards and process them, in parallel when ``workers > 1``."""
    results: dict[int, dict[str, Any]] = {}
    resumed = 0
    workers = cfg.corpus.workers
    with Progress(transient=True) as bar:
        task = bar.add_task(f"corpus {cfg.name}: shards", total=None)
        if workers == 1:
            for spec in iter_input_shards(cfg, work_dir, counts):
                resumed += is_processed(work_dir, spec["index"])
                results[spec["index"]] = process_input_shard(cfg, spec, work_dir)
                bar.update(task, advance=1)
        else:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures: list[Future] = []
                for spec in iter_input_shards(cfg, work_dir, counts):
                    resumed += is_processed(work_dir, spec["index"])
                    fut = pool.submit(process_input_shard, cfg, spec, work_dir)
                    fut.add_done_callback(lambda _f: bar.update(task, advance=1))
                    futures.append(fut)
                bar.update(task, total=len(futures))
                for fut in futures:
                    res = fut.result()
                    results[res["index"]] = res
    if resumed:  # only a rerun after an interruption finds shards already done
        log.info("corpus: %d input shards, %d already processed by an earlier run (resumed)", len(results), resumed)
    else:
        log.info("corpus: %d input shards processed", len(results))
    return [results[i] for i in sorted(results)]


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
    bases = [work_dir / PROCESSED / shard_name(s["index"]) for s in shard_stats]
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
    writers = {s: _SplitWriter(out_dir / s, corpus.shard_documents) for s in SPLITS}
    totals = {s: {"documents": 0, "words": 0, "bytes": 0} for s in SPLITS}
    per_source: dict[str, dict[str, int]] = {}
    lengths: list[np.ndarray] = []
    sets = EvalSets(**json.loads((work_dir / EVAL_TEXTS).read_text()))
    decon = corpus.decontamination
    audit = LeakAudit(sets.texts, decon.ngram, decon.min_words) if decon.audit else None
    pos = 0
    for base in bases:
        words = np.load(base.with_suffix(".words.npy"))
        mask = keep[pos : pos + len(words)]
        pos += len(words)
        table = read_work_table(base.with_suffix(".arrow")).filter(pa.array(mask))
        if audit is not None:
            audit.add(table.column("id").to_pylist(), table.column("text").to_pylist())
        words = words[mask]
        lengths.append(words)
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
            bucket = per_source.setdefault(name, {"documents": 0, "words": 0, "bytes": 0})
            _count(bucket, in_source, words, nbytes)
        for split, in_split in (("train", ~is_val), ("validation", is_val)):
            _count(totals[split], in_split, words, nbytes)
            writers[split].add(table.filter(pa.array(in_split)))
    for w in writers.values():
        w.flush(force=True)
    if corpus.write_dropped:
        _collect_dropped(bases, out_dir / "dropped.jsonl.gz")
    manifest = _manifest(
        cfg,
        shard_stats,
        counts,
        totals,
        per_source,
        exact_removed,
        near_removed,
        near_clusters,
        np.concatenate(lengths),
        work_dir,
    )
    if audit is not None:
        log.info("corpus: leakage audit of %d evaluation texts took %.1f s", len(audit.texts), audit.seconds)
    manifest["audit"] = audit_section(audit, sets.sources, sets.not_checked, decon, work_dir / "audit.json")
    manifest["shards"] = {s: writers[s].count for s in SPLITS}
    manifest["content_hash"] = _shards_hash(out_dir)
    manifest = validate_artifact(CorpusManifest, manifest).model_dump(mode="json")
    write_json_atomic(out_dir / "manifest.json", manifest)
    report.write_reports(out_dir, manifest, np.concatenate(lengths))
    (out_dir / "README.md").write_text(dataset_card(cfg, manifest))  # the Hub dataset card (``push`` rebuilds it)
    return manifest


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


def _manifest(
    cfg: DomainConfig,
    shard_stats: list[dict[str, Any]],
    counts: dict[str, Any],
    totals: dict[str, dict[str, int]],
    per_source: dict[str, dict[str, int]],
    exact_removed: int,
    near_removed: int,
    near_clusters: int,
    lengths: np.ndarray,
    work_dir: Path,
) -> dict[str, Any]:
    corpus = cfg.corpus
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
    documents_in = counts.get("documents_in", {})
    bands, rows = lsh_params(corpus.dedup) if corpus.dedup.near else (None, None)
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
                    **per_source.get(name, {"documents": 0, "words": 0, "bytes": 0}),
                }
            )
            for name in documents_in
        },
        "filters": filters,
        "filter_examples": drop_samples.merge(st.get("drop_samples") for st in shard_stats),
        "dedup": {
            "exact_removed": exact_removed,
            "near_removed": near_removed,
            "near_clusters": near_clusters,
            "threshold": corpus.dedup.threshold,
            "num_perm": corpus.dedup.num_perm,
            "ngram": corpus.dedup.ngram,
            "lsh_bands": bands,
            "lsh_rows": rows,
            "state_bytes_per_million_documents": (state_bytes_per_doc(bands) if bands else 16) * 1_000_000,
        },
        "decontamination": {
            "enabled": corpus.decontamination.enabled,
            "ngram": corpus.decontamination.ngram,
            "rule": (
                f"drop a document when >= {corpus.decontamination.max_overlap:.0%} of its "
                f"{corpus.decontamination.ngram}-grams are in the evaluation index; otherwise cut the "
                "sentences holding a hit n-gram or any part of an evaluation text shorter than "
                f"{corpus.decontamination.ngram} words found anywhere in the document; a text under "
                f"{corpus.decontamination.min_words} words removes only a whole document equal to it"
            ),
            "index": index_summary,
            "documents_removed": sum(c["documents"] for c in decon.values()),
            "sentences_removed": sum(c["sentences"] for c in decon.values()),
            "by_task_split": decon,
        },
        "malformed_lines": counts.get("malformed_lines", {"total": 0, "by_source": {}}),
        "length_words": report.length_summary(lengths),
    }
