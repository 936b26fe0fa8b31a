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

import json
import logging
import multiprocessing
import os
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domainbert import __version__
from domainbert.core import plotting
from domainbert.core.artifacts import atomic_output, is_complete, write_json_atomic
from domainbert.core.errors import disk_errors
from domainbert.core.fingerprints import file_identity, fingerprint, portable
from domainbert.core.processes import die_with_parent
from domainbert.core.progress import ProgressLine
from domainbert.corpus.decontaminate import EvalSets, build_index, eval_texts
from domainbert.corpus.merge import EVAL_TEXTS, merge
from domainbert.corpus.shards import INDEX, is_processed, iter_input_shards, process_input_shard
from domainbert.corpus.sources import input_fingerprint

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout

log = logging.getLogger(__name__)
# Bumped whenever the same inputs and config would give different output (hashing, filter behaviour), so a
# finished corpus or a half-done work folder of an older algorithm is rebuilt rather than reused.
ALGORITHM = 3


def stage_fingerprint(cfg: DomainConfig) -> str:
    """Fingerprint of the corpus config, the evaluation tasks it decontaminates against, the inputs and the
    version of the algorithm."""
    # Only what decontamination reads from a task (fine-tuning budgets must not trigger a corpus rebuild).
    tasks: list[object] = [
        [t.name, t.type, t.format, t.path, t.text_field, t.text_pair_field, t.tokens_field, t.hf_config_name]
        for t in cfg.finetune.tasks
    ]
    if _reads_eval_texts(cfg):
        files = [p for t in cfg.finetune.tasks if Path(t.path).is_dir() for p in Path(t.path).iterdir() if p.is_file()]
        tasks.append(sorted(f"{portable(str(p))}:{file_identity(p)}" for p in files))
    config = cfg.corpus.model_dump(mode="json")
    return fingerprint(config, tasks, input_fingerprint(cfg.corpus.sources), __version__, ALGORITHM)


def _shard_lines(name: str, lines: ProgressLine) -> Callable[[], None]:
    """A callable to call as each input shard finishes (from any thread): it logs a progress line when one is
    due (``ProgressLine``: the first shard, every 30 s or so, the last once the count is known)."""
    done, lock = 0, threading.Lock()

    def shard_done() -> None:
        nonlocal done
        with lock:
            done += 1
            if lines.due(done):
                of = f" of {lines.total}" if lines.total is not None else ""
                log.info("corpus %s: input shard %d%s processed", name, done, of)

    return shard_done


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
    with disk_errors(work_dir):  # Arrow and NumPy writes that fill the disk say where
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
        Path(layout.corpus),
        config=cfg.corpus.model_dump(mode="json"),
        fp=stage_fingerprint(cfg),
        root=layout.root,
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
    shard_done = _shard_lines(cfg.name, lines := ProgressLine(None))  # the count is known once sources are read
    if workers == 1:
        for spec in iter_input_shards(cfg, work_dir, counts):
            resumed += is_processed(work_dir, spec["index"])
            results[spec["index"]] = process_input_shard(cfg, spec, work_dir)
            shard_done()
    else:
        ctx = multiprocessing.get_context("spawn")
        # Workers die with this process, even when it is SIGKILLed (a worker can hold gigabytes).
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
        ) as pool:
            futures: list[Future[dict[str, Any]]] = []
            for spec in iter_input_shards(cfg, work_dir, counts):
                resumed += is_processed(work_dir, spec["index"])
                fut = pool.submit(process_input_shard, cfg, spec, work_dir)
                fut.add_done_callback(lambda _f: shard_done())
                futures.append(fut)
            lines.total = len(futures)
            for fut in futures:
                res = fut.result()
                results[res["index"]] = res
    if resumed:  # only a rerun after an interruption finds shards already done
        log.info("corpus: %d input shards, %d already processed by an earlier run (resumed)", len(results), resumed)
    else:
        log.info("corpus: %d input shards processed", len(results))
    return [results[i] for i in sorted(results)]
