"""The text the task-adaptive arms pretrain on (TAPT, Gururangan et al. 2020), built once per run.

``pretrain/task-text/`` holds the unlabeled text of every task's training examples, read as fine-tuning reads
them (same files, subsample and seed), in the corpus shard format so the arms' token stream reads it as it
reads the corpus. A training text that is also, normalised, in any task's validation or test split is left
out, and so is any document holding a task's evaluation text verbatim (the leakage audit's matcher): evaluation
text is never pretrained on. ``pretrain/task-text-curated/`` adds, for curated TAPT, the
``tapt.curated_neighbours`` corpus training documents nearest to each task text (TF-IDF cosine; the corpus
is already decontaminated). Each folder's ``manifest.json`` says what it holds: examples per task, what was
left out, tokens under the base tokenizer (the budget: ``tapt.epochs`` passes), the curated selection and its
scores, and the leakage audit of every document against every task's evaluation splits (``corpus.audit``);
a verbatim hit fails the stage. This module does not train (``trainer.py``).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from domainbert import __version__
from domainbert.config.domain import DomainConfig, resolved_dict
from domainbert.config.pretrain import ARMS, PretrainConfig
from domainbert.core.artifacts import atomic_output, fingerprint, is_complete, read_record
from domainbert.core.errors import DataError, ModelError
from domainbert.core.models import load_tokenizer
from domainbert.core.paths import RunLayout
from domainbert.corpus import store
from domainbert.corpus.audit import LeakAudit
from domainbert.corpus.decontaminate import eval_texts
from domainbert.task_data.split_overlap import normalised
from domainbert.task_data.splits import example_texts, load_task, task_data_hash

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
EVAL_SPLITS = ["validation", "test"]


def task_text_dir(layout: RunLayout, curated: bool) -> Path:
    return layout.root / "pretrain" / ("task-text-curated" if curated else "task-text")


def general_text_dir(layout: RunLayout) -> Path:
    """The control arm's general text (built by ``general_text.py``)."""
    return layout.root / "pretrain" / "general-text"


def task_documents(
    cfg: DomainConfig, evals: dict[str, list[str]] | None = None
) -> tuple[list[dict[str, str]], dict[str, dict[str, int]]]:
    """(documents, counts per task): each task's training texts, less those also in an evaluation split
    (``evals``: every task's evaluation texts by ``task/split``; read here when not given)."""
    evals = evals if evals is not None else eval_texts(cfg.finetune.tasks, EVAL_SPLITS).texts
    held_out = {normalised(t) for texts in evals.values() for t in texts}
    docs, counts, seen = [], {}, set()
    for task in cfg.finetune.tasks:
        if task.role == "general":  # the general-English task measures forgetting: never pretrained on
            continue
        kept = dropped = repeated = 0
        for i, example in enumerate(load_task(task).splits["train"]):
            text = " ".join(example_texts(example))
            key = normalised(text)
            if key in held_out:
                dropped += 1
            elif key in seen:
                repeated += 1
            else:
                seen.add(key)
                docs.append({"id": f"{task.name}/train/{i}", "text": text, "source": task.name})
                kept += 1
        counts[task.name] = {"kept": kept, "also_in_evaluation": dropped, "repeated": repeated}
    return docs, counts


def nearest_corpus_documents(texts: list[str], corpus: Path, k: int) -> tuple[list[dict[str, str]], list[float]]:
    """The corpus training documents among the ``k`` nearest (TF-IDF cosine) to any of ``texts``, best first,
    with each one's best score."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    documents = list(store.iter_documents(corpus, "train"))
    if not documents:
        return [], []
    vec = TfidfVectorizer(sublinear_tf=True, min_df=1, stop_words="english")
    matrix = vec.fit_transform([d["text"] for d in documents])
    best = np.zeros(len(documents))
    for start in range(0, len(texts), 256):  # a block of task texts against the whole corpus at once
        sims = (vec.transform(texts[start : start + 256]) @ matrix.T).toarray()
        top = np.argsort(-sims, axis=1)[:, :k]
        for row, cols in enumerate(top):
            best[cols] = np.maximum(best[cols], sims[row, cols])
    chosen = [int(i) for i in np.argsort(-best) if best[i] > 0]
    picked = [{"id": str(documents[i]["id"]), "text": str(documents[i]["text"]), "source": "corpus"} for i in chosen]
    return picked, [float(best[i]) for i in chosen]


def _fingerprint(cfg: DomainConfig, layout: RunLayout, curated: bool) -> str:
    config = {
        "tasks": {t.name: task_data_hash(t) for t in cfg.finetune.tasks},
        "subsets": [[t.max_train_examples, t.subset_seed] for t in cfg.finetune.tasks],
        "base_tokenizer": cfg.base_model.recipe(),
        "curated": resolved_dict(cfg.pretrain.tapt) if curated else None,
    }
    corpus = read_record(layout.corpus) if curated else None
    inputs = {"corpus": str(corpus["content_hash"]) if corpus else "none"}
    return fingerprint(config, inputs, __version__)


def ensure_task_text(cfg: DomainConfig, layout: RunLayout, curated: bool) -> Path:
    """Build the task text (curated: with its corpus neighbours) unless up to date; its folder.

    Raises:
        DataError: a task's evaluation text was found verbatim in the task text (the audit's verdict).
    """
    folder = task_text_dir(layout, curated)
    fp = _fingerprint(cfg, layout, curated)
    if is_complete(folder, fp):
        return folder
    evals = eval_texts(cfg.finetune.tasks, EVAL_SPLITS).texts  # read once: every check below uses them
    docs, counts, holding = _pretrainable_task_documents(cfg, evals)
    if not docs:
        raise DataError("the tasks' training splits hold no text to pretrain on", field="finetune.tasks")
    manifest: dict[str, Any] = {"tasks": counts, "holding_evaluation_text": holding, "task_documents": len(docs)}
    if curated:
        k = cfg.pretrain.tapt.curated_neighbours
        near, scores = nearest_corpus_documents([d["text"] for d in docs], Path(layout.corpus), k)
        near_ids = {d["id"] for d in without_evaluation_text(cfg, near, evals)[0]}
        scores = [s for d, s in zip(near, scores, strict=True) if d["id"] in near_ids]
        manifest["neighbours_holding_evaluation_text"] = len(near) - len(near_ids)
        near = [d for d in near if d["id"] in near_ids]
        docs += near
        manifest["curated"] = {
            "neighbours_per_text": k,
            "documents": len(near),
            "similarity": _quantiles(scores),
            "nearest": [{"id": d["id"], "score": round(s, 4)} for d, s in zip(near[:5], scores[:5], strict=False)],
        }
    lengths = _token_lengths(cfg, docs)
    manifest["task_tokens"] = sum(lengths[: manifest["task_documents"]])  # each text and its [SEP]
    manifest["tokens"] = sum(lengths)
    manifest["audit"] = _audit(cfg, docs, evals)
    with atomic_output(
        folder, config={"tapt": resolved_dict(cfg.pretrain.tapt), "curated": curated}, fp=fp, root=layout.root
    ) as tmp:
        (Path(tmp) / "train").mkdir()
        store.write_shard(Path(tmp) / "train" / "shard-00000.parquet", [{**d, "meta": {}} for d in docs])
        (Path(tmp) / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    log.info(
        "task text%s: %d documents (%d from the tasks), %d tokens -> %s",
        " (curated)" if curated else "",
        len(docs),
        manifest["task_documents"],
        manifest["tokens"],
        folder,
    )
    return folder


def _token_lengths(cfg: DomainConfig, docs: list[dict[str, str]]) -> list[int]:
    """Each document's tokens under the base tokenizer, its [SEP] included (how the token stream packs it)."""
    tokenizer = load_tokenizer(cfg.base_model.name_or_path)
    enc = tokenizer([d["text"] for d in docs], add_special_tokens=False, verbose=False)  # long ones are packed
    return [len(ids) + 1 for ids in enc["input_ids"]]


def _pretrainable_task_documents(
    cfg: DomainConfig, evals: dict[str, list[str]]
) -> tuple[list[dict[str, str]], dict[str, dict[str, int]], int]:
    """The tasks' documents the task text keeps (``task_documents`` less those holding evaluation text), the
    counts per task, and how many held evaluation text."""
    docs, counts = task_documents(cfg, evals)
    kept, holding = without_evaluation_text(cfg, docs, evals)
    return kept, counts, holding


def estimated_task_tokens(cfg: DomainConfig) -> int:
    """The task tokens the task text will hold (its manifest's ``task_tokens``), before it is built: the same
    documents, read and counted as ``ensure_task_text`` reads and counts them."""
    docs, _, _ = _pretrainable_task_documents(cfg, eval_texts(cfg.finetune.tasks, EVAL_SPLITS).texts)
    return sum(_token_lengths(cfg, docs))


def without_evaluation_text(
    cfg: DomainConfig, docs: list[dict[str, str]], evals: dict[str, list[str]]
) -> tuple[list[dict[str, str]], int]:
    """``docs`` less every document holding a task's evaluation text verbatim (a short NER test sentence inside
    another task's training document, say); and how many were left out."""
    dc = cfg.corpus.decontamination
    audit = LeakAudit(evals, ngram=dc.ngram, min_words=dc.min_words)
    audit.add([d["id"] for d in docs], [d["text"] for d in docs])
    kept = [d for d in docs if d["id"] not in audit.leaking_documents]
    return kept, len(docs) - len(kept)


def _audit(cfg: DomainConfig, docs: list[dict[str, str]], evals: dict[str, list[str]]) -> dict[str, Any]:
    """Every task's evaluation texts looked for in every document that will be written; a verbatim hit is an
    error (``without_evaluation_text`` left none, so one means the two disagree)."""
    dc = cfg.corpus.decontamination
    audit = LeakAudit(evals, ngram=dc.ngram, min_words=dc.min_words)
    audit.add([d["id"] for d in docs], [d["text"] for d in docs])
    result = audit.result()
    leaked = {owner: r["examples"] for owner, r in result.items() if r["verbatim"]}
    if leaked:
        owner, examples = next(iter(leaked.items()))
        raise DataError(
            f"evaluation text of {owner} found verbatim in the task text the TAPT arms would train on "
            f"(e.g. {examples[0]['text']!r} in {examples[0]['document']})",
            field="finetune.tasks",
        )
    return {
        owner: {k: r[k] for k in ("texts", "verbatim", "texts_with_ngram_hits", "ngrams_found")}
        for owner, r in result.items()
    }


def _quantiles(scores: list[float]) -> dict[str, float]:
    if not scores:
        return {}
    q = np.quantile(scores, [0.0, 0.5, 1.0])
    return {"min": round(float(q[0]), 4), "median": round(float(q[1]), 4), "max": round(float(q[2]), 4)}


def read_manifest(layout: RunLayout, curated: bool) -> dict[str, Any] | None:
    path = task_text_dir(layout, curated) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def arm_config(cfg: DomainConfig, arm: str, layout: RunLayout, estimate: bool = False) -> PretrainConfig:
    """The pretraining config ``arm`` trains with: its lr and warmup (``for_arm``) and, for a task-text arm,
    its budget: ``tapt.epochs`` passes over the task text (the tasks' own tokens, also for curated TAPT, so
    curation and repetition get the same compute). ``estimate``: a task text not built yet is sized from the
    task files (``estimated_task_tokens``), as ``domainbert plan`` needs before the run.

    Raises:
        ModelError: a task-text arm whose task text is not built yet (and ``estimate`` is off).
    """
    pcfg = cfg.pretrain.for_arm(arm, layout.replicate)
    kind = ARMS[arm]
    if not kind.on_task_text:
        return pcfg
    manifest = read_manifest(layout, kind.data == "curated")
    if manifest is None and not estimate:
        raise ModelError(f"the task text of arm {arm} is not built yet", file=task_text_dir(layout, False))
    tokens = manifest["task_tokens"] if manifest is not None else estimated_task_tokens(cfg)
    budget = math.ceil(cfg.pretrain.tapt.epochs * tokens)
    return pcfg.model_copy(update={"budget_tokens": budget})


def data_dir(layout: RunLayout, arm: str) -> Path:
    """The folder of shards ``arm`` pretrains on: the corpus, its task text or the control's general text."""
    kind = ARMS[arm]
    if kind.on_general_text:
        return general_text_dir(layout)
    return Path(layout.corpus) if not kind.on_task_text else task_text_dir(layout, kind.data == "curated")
