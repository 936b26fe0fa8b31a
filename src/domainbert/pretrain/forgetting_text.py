"""The general-English task's texts, kept out of every general text a pretraining stream reads.

``finetune.forgetting_task`` adds a general-English task (role ``general``) that every model is fine-tuned on,
so the report can say what the domain's pretraining cost outside the domain. Its texts come from the same
general corpus the base warm-up, the control arm and the replay read (WordNet glosses), so each of those
drops any document holding a text of any split of a general task verbatim, as the leak audit (``corpus.audit``)
finds it: train included, since a model pretrained on a gloss has seen its answer's context. The corpus stage's
decontamination already covers the validation and test splits, as for any task. This module does not read the
general corpus's files (``data.read_jsonl_texts``) nor audit the pretraining streams (``task_text``).
"""

from __future__ import annotations

from domainbert.config.domain import DomainConfig
from domainbert.config.finetune import TaskConfig
from domainbert.corpus.audit import LeakAudit
from domainbert.pretrain.data import read_jsonl_texts
from domainbert.task_data.splits import split_texts, task_data_hash

SPLITS = ("train", "validation", "test")


def general_tasks(cfg: DomainConfig) -> list[TaskConfig]:
    """The tasks that measure forgetting (``role: general``); empty when ``forgetting_task`` is off."""
    return [t for t in cfg.finetune.tasks if t.role == "general"]


def forgetting_texts(cfg: DomainConfig) -> dict[str, list[str]]:
    """Every text of every split of the general tasks, by ``task/split`` (the leak audit's owners)."""
    return {f"{t.name}/{split}": split_texts(t, split)[1] for t in general_tasks(cfg) for split in SPLITS}


def forgetting_identity(cfg: DomainConfig) -> dict[str, str]:
    """The general tasks' data by content (task name -> hash), for the fingerprints of what leaves them out."""
    return {t.name: task_data_hash(t) for t in general_tasks(cfg)}


def general_corpus_texts(cfg: DomainConfig, files: list[str]) -> list[str]:
    """The ``text`` fields of the general corpus's first ``base_warmup.max_documents`` records, less every one
    holding a general task's text verbatim as the leak audit finds it: what the warm-up, the control and the
    replay start from."""
    texts = read_jsonl_texts(files, cfg.pretrain.base_warmup.max_documents)
    held_out = forgetting_texts(cfg)
    if not held_out:
        return texts
    dc = cfg.corpus.decontamination
    audit = LeakAudit(held_out, ngram=dc.ngram, min_words=dc.min_words)
    ids = [str(i) for i in range(len(texts))]
    audit.add(ids, texts)
    return [t for i, t in zip(ids, texts, strict=True) if i not in audit.leaking_documents]
