"""The general text the equal-token control arm pretrains on, built once per run.

The control (``control`` in ``config.pretrain.ARMS``) answers what "continued beat the base" cannot: whether the
domain's text helped, or any further masked-LM training would have (Don't Stop Pretraining's irrelevant-domain
control). It starts where ``continued`` starts and trains ``continued``'s token budget on general text: the
base warm-up's corpus (``base_warmup.warmup_corpus``: the vocab stage's control corpus less the files kept to
measure forgetting, and less the general-English task's texts: ``forgetting_text``), so the forgetting set
stays unseen. ``pretrain/general-text/`` holds that text in the corpus
shard format, so the arms' token stream reads it as it reads the corpus; documents holding a task's evaluation
text verbatim are left out, as for the task text. Its ``manifest.json`` says what it holds. This module does
not train (``trainer.py``) and does not decide the budget (``pretrain.budget_tokens``, shared with continued).
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

from domainbert import __version__
from domainbert.config.domain import DomainConfig
from domainbert.core.artifacts import atomic_output, file_hash, fingerprint, is_complete
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.corpus import store
from domainbert.corpus.decontaminate import eval_texts
from domainbert.pretrain.base_warmup import warmup_corpus
from domainbert.pretrain.forgetting_text import general_corpus_texts
from domainbert.pretrain.task_text import EVAL_SPLITS, MANIFEST, general_text_dir, without_evaluation_text
from domainbert.task_data.splits import task_data_hash

log = logging.getLogger(__name__)


def _fingerprint(cfg: DomainConfig, files: list[str]) -> str:
    config = {
        "files": sorted(file_hash(Path(f)) for f in files),  # by content: the folder may move
        "max_documents": cfg.pretrain.base_warmup.max_documents,
        "seed": cfg.pretrain.seed,
        "tasks": {t.name: task_data_hash(t) for t in cfg.finetune.tasks},  # the evaluation text left out
    }
    return fingerprint(config, {}, __version__)


def shuffled_general_texts(cfg: DomainConfig, files: list[str]) -> list[str]:
    """The general corpus's texts in the pretraining seed's order (the files are sorted by headword: mixed, as the
    warm-up mixes them); the control's and the replay's text both start here."""
    texts = general_corpus_texts(cfg, files)  # less the general-English task's glosses
    random.Random(cfg.pretrain.seed).shuffle(texts)
    return texts


def ensure_general_text(cfg: DomainConfig, layout: RunLayout) -> Path:
    """Build the control's general text unless up to date; its folder.

    Raises:
        DataError: no general text is left once documents holding evaluation text are set aside.
        ConfigError: no general corpus is configured (``base_warmup.warmup_corpus``).
    """
    files = warmup_corpus(cfg)
    folder = general_text_dir(layout)
    fp = _fingerprint(cfg, files)
    if is_complete(folder, fp):
        return folder
    texts = shuffled_general_texts(cfg, files)
    docs = [{"id": f"general/{i}", "text": t, "source": "general"} for i, t in enumerate(texts)]
    docs, holding = without_evaluation_text(cfg, docs, eval_texts(cfg.finetune.tasks, EVAL_SPLITS).texts)
    if not docs:
        raise DataError("the general corpus holds no text for the control arm", field="pretrain.base_warmup.corpus")
    manifest: dict[str, Any] = {
        "files": [Path(f).name for f in files],
        "documents": len(docs),
        "holding_evaluation_text": holding,
    }
    write_documents(folder, docs, manifest, {"general_text": manifest["files"]}, fp, layout.root)
    log.info("general text for the control arm: %d documents from %d file(s) -> %s", len(docs), len(files), folder)
    return folder


def write_documents(
    folder: Path, docs: list[dict[str, str]], manifest: dict[str, Any], record: dict[str, Any], fp: str, root: Path
) -> None:
    """``docs`` as one corpus-format training shard in ``folder``, with its manifest, complete or absent."""
    with atomic_output(folder, config=record, fp=fp, root=root) as tmp:
        (Path(tmp) / "train").mkdir()
        store.write_shard(Path(tmp) / "train" / "shard-00000.parquet", [{**d, "meta": {}} for d in docs])
        (Path(tmp) / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
