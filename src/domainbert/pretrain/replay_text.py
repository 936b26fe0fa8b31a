"""The general text replaying arms mix into their stream (``pretrain.replay``), built once per run.

``pretrain/replay-text/`` holds the control arm's source (``base_warmup.warmup_corpus``: the general corpus less
the forgetting set, so general perplexity is still measured on unseen text), decontaminated as the corpus is:
the corpus stage's index of every task's validation and test texts and its ``Decontaminator`` cut the
sentences that match (``corpus.decontamination`` settings; off when the corpus stage's is), and any document
still holding an evaluation text verbatim is left out (``task_text.without_evaluation_text``). The shards are in
the corpus format, so the arm's token stream reads them as it reads the corpus. Its ``manifest.json`` says what
was cut and left out. This module does not mix the text in (``replay.py``) nor decide the share.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from domainbert import __version__
from domainbert.config.domain import DomainConfig, resolved_dict
from domainbert.core.artifacts import file_hash, fingerprint, is_complete
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.corpus.decontaminate import Decontaminator, build_index, eval_texts
from domainbert.pretrain.base_warmup import warmup_corpus
from domainbert.pretrain.general_text import shuffled_general_texts, write_documents
from domainbert.pretrain.task_text import EVAL_SPLITS, without_evaluation_text
from domainbert.task_data.splits import task_data_hash

log = logging.getLogger(__name__)


def replay_text_dir(layout: RunLayout) -> Path:
    return layout.root / "pretrain" / "replay-text"


def _fingerprint(cfg: DomainConfig, files: list[str]) -> str:
    config = {
        "source": cfg.pretrain.replay.source,
        "files": sorted(file_hash(Path(f)) for f in files),  # by content: the folder may move
        "max_documents": cfg.pretrain.base_warmup.max_documents,
        "seed": cfg.pretrain.seed,
        "tasks": {t.name: task_data_hash(t) for t in cfg.finetune.tasks},  # what it is decontaminated against
        "decontamination": resolved_dict(cfg.corpus.decontamination),
    }
    return fingerprint(config, {}, __version__)


def decontaminated(cfg: DomainConfig, texts: list[str], evals: dict[str, list[str]]) -> tuple[list[str], dict]:
    """``texts`` through the corpus stage's decontamination against ``evals`` (``task/split`` -> texts): matching
    sentences cut, documents left empty dropped; and the removals per task/split."""
    decon = cfg.corpus.decontamination
    if not decon.enabled or not evals:
        return texts, {}
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index.npz"
        build_index(evals, decon, index)
        checker = Decontaminator(index, decon)
        checked = checker.check_batch(texts)
    removed = {owner: counts for owner, counts in checker.removed.items() if any(counts.values())}
    return [t for t in checked if t is not None], removed


def ensure_replay_text(cfg: DomainConfig, layout: RunLayout) -> Path:
    """Build the replay text unless up to date; its folder.

    Raises:
        DataError: no general text is left once decontaminated.
        ConfigError: no general corpus is configured (``base_warmup.warmup_corpus``).
    """
    files = warmup_corpus(cfg)
    folder = replay_text_dir(layout)
    fp = _fingerprint(cfg, files)
    if is_complete(folder, fp):
        return folder
    texts = shuffled_general_texts(cfg, files)  # the control's text, in the control's order
    evals = eval_texts(cfg.finetune.tasks, EVAL_SPLITS).texts
    kept, removed = decontaminated(cfg, texts, evals)
    docs = [{"id": f"replay/{i}", "text": t, "source": "general"} for i, t in enumerate(kept)]
    docs, holding = without_evaluation_text(cfg, docs, evals)
    if not docs:
        raise DataError("the general corpus holds no text to replay", field="pretrain.replay.source")
    manifest: dict[str, Any] = {
        "files": [Path(f).name for f in files],
        "documents": len(docs),
        "decontamination_removed": removed,
        "holding_evaluation_text": holding,
    }
    write_documents(folder, docs, manifest, {"replay_text": manifest["files"]}, fp, layout.root)
    log.info("replay text: %d documents from %d file(s) -> %s", len(docs), len(files), folder)
    return folder
