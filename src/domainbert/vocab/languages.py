"""Per-language figures of a multilingual corpus: documents per language in the train split, and how each
tokenizer cuts each language's held-out text (fertility, UNK rate: ``fertility.heldout_stats``).

A document's language is its ``meta.lang`` (what the source recorded, e.g. Twitter's tag); the figures are
None when no document carries one, so a monolingual corpus costs one pass over its metadata column. It does
not identify languages itself and decides nothing.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from domainbert.corpus import store
from domainbert.vocab.fertility import heldout_stats
from domainbert.vocab.reference_vocabs import TokenizerInfo


def language_of(meta: object) -> str | None:
    """``meta.lang`` of a stored document (the store keeps ``meta`` as a JSON string)."""
    if isinstance(meta, str) and meta:
        meta = json.loads(meta)
    lang = meta.get("lang") if isinstance(meta, dict) else None
    return str(lang) if lang else None


def by_language(corpus: Path, heldout_documents: int, infos: list[TokenizerInfo]) -> dict[str, Any] | None:
    """``{"train_documents": {lang: n}, "heldout": {lang: {tokenizer: stats}}}``, languages by train count;
    held-out figures on up to ``heldout_documents`` validation documents of each language; None without
    languages."""
    found = (language_of(row["meta"]) for row in store.iter_documents(corpus, "train", columns=["meta"]))
    counts = Counter(lang for lang in found if lang is not None)
    if not counts:
        return None
    texts: dict[str, list[str]] = defaultdict(list)
    for row in store.iter_documents(corpus, "validation", columns=["text", "meta"]):
        lang = language_of(row["meta"])
        if lang is not None and len(texts[lang]) < heldout_documents:
            texts[lang].append(row["text"])
    return {
        "train_documents": {lang: n for lang, n in counts.most_common()},
        "heldout_documents": {lang: len(texts[lang]) for lang, _ in counts.most_common()},
        "heldout": {
            lang: {info.name: heldout_stats(info, texts[lang]) for info in infos}
            for lang, _ in counts.most_common()
            if texts[lang]
        },
    }
