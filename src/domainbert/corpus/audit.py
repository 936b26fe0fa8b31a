"""Leakage audit of a finished corpus: which evaluation texts are still in it, verbatim or in part.

Deliberately separate from decontamination: it imports nothing of ``decontaminate``, ``words`` or
``hashing`` and matches differently, so a bug in the matcher (a tokenisation slip, a missed rule) does not
hide in its own check. Texts and documents are normalised the same way: ``str.lower``, word characters as
Python's ``re`` defines ``\\w``, every run of other characters one space. In one batch the documents become a
single string, each ``"\\n w1 w2 ... wk \\n"`` (newlines between documents, a space around every word), so a
pattern never matches across two documents or inside a word.

* Verbatim: a text of at least ``min_words`` words leaks when ``" w1 ... wk "`` occurs in a document; a
  shorter one when a whole document equals it (``"\\n w1 ... wk \\n"``); all patterns are searched at once
  with Aho-Corasick (``pyahocorasick``), a text longer than ``ngram`` words by its first ``ngram`` words,
  confirmed by a substring test on the document.
* N-grams: every window of ``ngram`` words of a text, hashed from its normalised characters (polynomial
  hashes modulo 2^64 of the words, a weighted sum of those), is looked up among the same windows of the
  corpus; a text counts once it has one hit.

``LeakAudit`` takes the corpus batch by batch (``add``) and sums up per task/split (``result``): texts,
verbatim hits, texts with an n-gram hit, n-grams found, a few examples with the document id; ``audit_section``
turns that into the manifest's ``audit`` section and fails on a verbatim leak unless the domain allows leaks.
What it leaves out: removing anything (``decontaminate``) and reading the tasks (``finetune.tasks``).
"""

from __future__ import annotations

import json
import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import ahocorasick
import numpy as np

from domainbert.config.corpus import DecontaminationConfig
from domainbert.core.errors import DataError

EXAMPLES = 3
METHOD = (
    "independent of decontamination: lowercase, \\w+ words joined by single spaces; a text of at least {m} "
    "words is verbatim when it occurs in a document word-aligned (Aho-Corasick), a shorter one when a whole "
    "document equals it; n-grams: the text's {n}-word windows found anywhere in the corpus"
)
_SEP = 3  # characters between two documents in the buffer: [a word's trailing space] "\n" " "
_NL, _SPACE = 10, 32
_BASE = np.uint64(0x100000001B3)  # odd multipliers: products modulo 2^64 lose no bits
_MUL = np.uint64(0xBF58476D1CE4E5B9)


@lru_cache(maxsize=1)
def _word_table() -> np.ndarray:
    """For every code point: is it a word character for ``re`` (``\\w``)."""
    chars = "".join(map(chr, range(0x110000)))
    kept = re.sub(r"\W", "\0", chars).encode("utf-32-le", "surrogatepass")
    return np.frombuffer(kept, dtype=np.uint32) != 0


@lru_cache(maxsize=8)
def _powers(base: int, n: int) -> np.ndarray:
    """``base^i`` modulo 2^64 for i < n."""
    arr = np.full(n, base, dtype=np.uint64)
    arr[0] = 1
    return np.multiply.accumulate(arr)  # wraps modulo 2^64, as wanted


def _mix(values: np.ndarray) -> np.ndarray:
    values ^= values >> np.uint64(29)  # spread every input bit over the high bits (read by the lookup table)
    values *= _MUL
    values ^= values >> np.uint64(32)
    return values


def normalise(texts: list[str]) -> np.ndarray:
    """The texts as one array of code points: ``"\\n w1 w2 \\n w1 \\n ..."`` (see the module docstring)."""
    lowered = [t.lower() for t in texts]
    lengths = np.fromiter(map(len, lowered), dtype=np.int64, count=len(lowered))
    buffer = (" " * _SEP).join(["", *lowered, ""])
    cps = np.frombuffer(buffer.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
    seps = np.cumsum(np.concatenate([[0], lengths])) + _SEP * np.arange(len(lowered) + 1)
    word = _word_table()[cps]
    word[seps] = word[seps + 1] = word[seps + 2] = False
    keep = word.copy()
    ends = np.flatnonzero(~word[1:] & word[:-1]) + 1  # the character after each word becomes its space
    keep[ends] = True
    cps[ends] = _SPACE
    keep[seps + 1] = keep[seps + 2] = True
    cps[seps + 1], cps[seps + 2] = _NL, _SPACE
    return cps[keep]


def _nth_space(text: str, n: int) -> int:
    """The index of the (n + 1)th space of ``text``: the end of its n-th word when it starts with a space."""
    at = 0
    for _ in range(n):
        at = text.index(" ", at + 1)
    return at


def _to_str(cps: np.ndarray) -> str:
    return cps.tobytes().decode("utf-32-le", "surrogatepass")


def _ngram_hashes(cps: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Hash and first character of every window of ``n`` words of ``normalise``'s output that stays inside
    one document: each word a polynomial hash of its characters, each window a weighted sum of its words."""
    in_word = (cps != _SPACE) & (cps != _NL)
    starts = np.flatnonzero(in_word[1:] & ~in_word[:-1]) + 1
    if len(starts) < n:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    ends = np.flatnonzero(in_word[:-1] & ~in_word[1:]) + 1
    lengths = ends - starts
    chars = cps[in_word].astype(np.uint64)
    offsets = np.cumsum(lengths) - lengths
    rank = np.arange(len(chars)) - np.repeat(offsets, lengths)  # a character's place in its word
    with np.errstate(over="ignore"):
        chars *= _powers(int(_BASE), int(lengths.max()))[rank]
        words = _mix(np.add.reduceat(chars, offsets) ^ lengths.astype(np.uint64) * _MUL)
        doc = np.searchsorted(np.flatnonzero(cps == _NL), starts)  # fewer documents than characters
        m = len(words) - n + 1
        inside = doc[:m] == doc[n - 1 :]
        weights = _powers(int(_MUL), n)
        acc = np.zeros(m, dtype=np.uint64)
        for k in range(n):
            acc += words[k : k + m] * weights[k]
    return _mix(acc[inside]), starts[:m][inside]


class LeakAudit:
    """Counts evaluation texts (``"task/split" -> texts``) found in the documents passed to ``add``."""

    def __init__(self, texts_by_owner: dict[str, list[str]], ngram: int, min_words: int) -> None:
        self.ngram, self.min_words = ngram, min_words
        self.owners = sorted(texts_by_owner)
        self.texts = [(o, t) for o in self.owners for t in texts_by_owner[o]]
        self.found = np.zeros(len(self.texts), dtype=bool)
        self.examples: dict[str, list[dict[str, Any]]] = {o: [] for o in self.owners}
        self.automaton = ahocorasick.Automaton()
        self.patterns: dict[str, list[int]] = {}
        self.words = np.zeros(len(self.texts), dtype=np.int64)
        cps = normalise([text for _, text in self.texts])  # all texts at once, one "document" each
        self.norms = _to_str(cps).split("\n")[1:-1]  # each " w1 ... wk " (" " for no words)
        for i, norm in enumerate(self.norms):
            self.words[i] = norm.count(" ") - 1
            if self.words[i] >= min_words:
                # a long text by its first n words only (the automaton's memory grows with the patterns'
                # characters); a hit is confirmed against the whole document in ``add``
                key = norm if self.words[i] <= ngram else norm[: _nth_space(norm, ngram) + 1]
                self.patterns.setdefault(key, []).append(i)
            elif self.words[i] > 0:
                self.patterns.setdefault(f"\n{norm}\n", []).append(i)
        for key, ids in self.patterns.items():
            self.automaton.add_word(key, (len(key), ids))
        if self.patterns:
            self.automaton.make_automaton()
        all_grams, first = _ngram_hashes(cps, ngram)
        self.gram_text = np.searchsorted(np.flatnonzero(cps == _NL), first, side="right") - 1
        self.unique, self.gram_slot = np.unique(all_grams, return_inverse=True)
        self.table = np.zeros(1 << 22, dtype=bool)
        self.table[self.unique >> np.uint64(42)] = True
        self.gram_found = np.zeros(len(self.unique), dtype=bool)
        self.ngram_examples: dict[str, list[dict[str, Any]]] = {o: [] for o in self.owners}
        self.seconds = 0.0  # time spent in ``add`` (logged by the build, kept out of the manifest)
        self.leaking_documents: set[str] = set()  # every document with a verbatim hit, for callers that drop them

    def add(self, ids: list[str], texts: list[str]) -> None:
        """Check one batch of corpus documents (their ids name them in the examples)."""
        start = time.perf_counter()
        cps = normalise(texts)
        newlines = np.flatnonzero(cps == _NL)
        if self.patterns:
            joined = _to_str(cps)
            for end, (length, found) in self.automaton.iter(joined):
                doc = int(np.searchsorted(newlines, end - length + 1, side="right")) - 1
                for i in found:
                    if len(self.norms[i]) <= length or self.norms[i] in joined[newlines[doc] : newlines[doc + 1]]:
                        self._verbatim(i, ids[doc])
        if len(self.unique):
            grams, first = _ngram_hashes(cps, self.ngram)
            maybe = np.flatnonzero(self.table[grams >> np.uint64(42)])
            slot = np.searchsorted(self.unique, grams[maybe]).clip(max=len(self.unique) - 1)
            hit = self.unique[slot] == grams[maybe]
            new = np.flatnonzero(hit & ~self.gram_found[slot])
            self.gram_found[slot[hit]] = True
            for k in new[: EXAMPLES * len(self.owners)].tolist():
                doc = int(np.searchsorted(newlines, first[maybe[k]], side="right")) - 1
                self._ngram_example(int(slot[k]), ids[doc])
        self.seconds += time.perf_counter() - start

    def _verbatim(self, i: int, doc_id: str) -> None:
        self.leaking_documents.add(doc_id)
        owner, text = self.texts[i]
        if not self.found[i] and len(self.examples[owner]) < EXAMPLES:
            self.examples[owner].append({"text": _clip(text), "document": doc_id})
        self.found[i] = True

    def _ngram_example(self, slot: int, doc_id: str) -> None:
        i = int(self.gram_text[np.flatnonzero(self.gram_slot == slot)[0]])
        owner, text = self.texts[i]
        shown = self.ngram_examples[owner]
        if len(shown) < EXAMPLES and all(e["text"] != _clip(text) for e in shown):
            shown.append({"text": _clip(text), "document": doc_id})

    def result(self) -> dict[str, dict[str, Any]]:
        """Per task/split: texts, texts under ``min_words`` words (matched against whole documents only),
        texts found verbatim, texts of at least ``ngram`` words and how many of them have an n-gram in the
        corpus, n-grams and n-grams found, examples of both."""
        per_text = np.bincount(
            self.gram_text, weights=self.gram_found[self.gram_slot], minlength=len(self.texts)
        ).astype(np.int64)
        owner_of = np.array([self.owners.index(o) for o, _ in self.texts], dtype=np.int64)
        out = {}
        for k, owner in enumerate(self.owners):
            mine = owner_of == k
            out[owner] = {
                "texts": int(mine.sum()),
                "whole_document_texts": int((mine & (self.words > 0) & (self.words < self.min_words)).sum()),
                "verbatim": int((mine & self.found).sum()),
                "ngram_texts": int((mine & (self.words >= self.ngram)).sum()),
                "texts_with_ngram_hits": int((mine & (per_text > 0)).sum()),
                "ngrams": int(np.isin(self.gram_text, np.flatnonzero(mine)).sum()),
                "ngrams_found": int(per_text[mine].sum()),
                "examples": self.examples[owner],
                "ngram_examples": self.ngram_examples[owner],
            }
        return out


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def audit_section(
    audit: LeakAudit | None,
    sources: dict[str, str],
    not_checked: dict[str, str],
    cfg: DecontaminationConfig,
    details: Path,
) -> dict[str, Any]:
    """The manifest's ``audit`` section from a finished ``LeakAudit`` (``None``: the audit is switched off).

    Raises:
        DataError: an evaluation text is in the corpus verbatim and ``cfg.allow_leaks`` is off; the full
            section is written to ``details`` first, so the examples can be read there.
    """
    section: dict[str, Any] = {
        "enabled": audit is not None,
        "allow_leaks": cfg.allow_leaks,
        "ngram": cfg.ngram,
        "min_words": cfg.min_words,
        "method": METHOD.format(m=cfg.min_words, n=cfg.ngram),
        "texts": 0,
        "verbatim": 0,
        "texts_with_ngram_hits": 0,
        "not_checked": not_checked,
        "by_task_split": {},
    }
    if audit is not None:
        for owner, counts in audit.result().items():
            section["by_task_split"][owner] = {"source": sources.get(owner, ""), **counts}
            for key in ("texts", "verbatim", "texts_with_ngram_hits"):
                section[key] += counts[key]
    leaks = {o: c for o, c in section["by_task_split"].items() if c["verbatim"]}
    if leaks and not cfg.allow_leaks:
        details.write_text(json.dumps(section, indent=2, ensure_ascii=False))
        first = next(iter(leaks.values()))["examples"][0]
        raise DataError(
            f"corpus audit: {section['verbatim']} evaluation texts are in the corpus verbatim ("
            + ", ".join(f"{o}: {c['verbatim']}" for o, c in leaks.items())
            + f"), e.g. {first['text']!r} in document {first['document']!r}; all counts and examples in "
            f"{details}; set corpus.decontamination.allow_leaks: true to build anyway",
            field="corpus.decontamination",
        )
    return section
