"""Decontamination: remove corpus text that overlaps the domain's evaluation sets.

The evaluation texts are every text of the chosen splits (``corpus.decontamination.splits``) of every task in
``finetune.tasks``, read by ``task_data.splits.split_texts``, the reader fine-tuning uses (same file names and
aliases, formats, fields and text pairs). ``eval_texts`` gathers them and never skips quietly: a local task
whose split is missing or unreadable is an error; a hub task that cannot be read (offline) is listed as not
checked, which the manifest and the report show.

Texts are matched as lowercase ``\\w+`` words (``words.lower_words``), by their length in words:

* at least ``ngram`` words: their n-gram hashes are indexed; a document n-gram that hits is a match;
* ``min_words`` to ``ngram - 1`` words: the hash of the whole text; a document's word windows of each indexed
  length are looked up (only where the window's first ``min_words`` words start some short text), so such a
  text is found anywhere in a document, across sentence boundaries;
* fewer than ``min_words`` words: only a whole document equal to the text.

The rule, per document: if at least ``max_overlap`` of its n-grams hit, the whole document is removed;
otherwise every sentence (split at newlines and sentence-final punctuation) holding a word of a match is cut
and the rest is kept; a document left without sentences is removed. Cutting can bring two sentences together
into a new match, so cut documents are checked again until nothing changes. Removals are attributed to the
task/split owning most of the hits. What this module leaves out: the audit of the finished corpus
(``audit``, deliberately separate code).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from domainbert.config.corpus import DecontaminationConfig
from domainbert.core.errors import DataError
from domainbert.corpus.hashing import doc_ngrams, ngram_hashes_at, segment_hashes, sorted_unique
from domainbert.corpus.words import WordBatch, lower_words
from domainbert.task_data.splits import split_texts

if TYPE_CHECKING:
    import numpy.typing as npt

    from domainbert.config.finetune import TaskConfig

log = logging.getLogger(__name__)
_SENTENCE_SPLIT = re.compile(r"(\n+|(?<=[.!?])\s+)")


@dataclass
class EvalSets:
    """The evaluation texts by ``"task/split"``, where each came from, and what could not be read (and why)."""

    texts: dict[str, list[str]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    not_checked: dict[str, str] = field(default_factory=dict)


def eval_texts(tasks: list[TaskConfig], splits: list[str]) -> EvalSets:
    """Every text of ``splits`` of every task, through the fine-tuning reader.

    Raises:
        DataError: a local task's split is missing, malformed or empty (naming the file or folder).
    """
    sets = EvalSets()
    for task in tasks:
        hub = task.format == "hf" and not Path(task.path).exists()
        for split in splits:
            owner = f"{task.name}/{split}"
            try:
                source, texts = split_texts(task, split)
            except DataError as exc:
                if not hub:
                    raise
                sets.not_checked[owner] = f"hub dataset not read: {exc}"
                log.warning("corpus: %s not checked against the corpus: %s", owner, exc)
                continue
            if not texts:
                raise DataError(f"the {split} split is empty: nothing to check the corpus against", file=source)
            sets.texts[owner], sets.sources[owner] = texts, source
    return sets


def build_index(
    texts_by_owner: dict[str, list[str]], cfg: DecontaminationConfig, path: Path
) -> dict[str, dict[str, int]]:
    """Index the evaluation texts (``"task/split" -> texts``) into ``path`` (.npz); returns per task/split how
    many texts were indexed by each rule and how many n-grams."""
    owners = sorted(texts_by_owner.items())
    m = cfg.min_words
    grams, gram_owner = [], []
    short: dict[str, list[np.ndarray]] = {"grams": [], "lengths": [], "prefix": [], "owners": []}
    tiny: dict[str, list[np.ndarray]] = {"grams": [], "owners": []}
    summary: dict[str, dict[str, int]] = {}
    for code, (name, texts) in enumerate(owners):
        words = lower_words(texts)  # all texts at once; n-grams per text
        lengths, hashes = words.counts, words.hashes
        g, _, _ = doc_ngrams(hashes, lengths, cfg.ngram)
        grams.append(g)
        gram_owner.append(np.full(len(g), code, dtype=np.int32))
        starts = words.offsets()[:-1]
        whole = segment_hashes(hashes, words.offsets())  # each text as one k-gram of its own length
        is_short = (lengths >= m) & (lengths < cfg.ngram)
        is_tiny = (lengths > 0) & (lengths < m)
        short["grams"].append(whole[is_short])
        short["lengths"].append(lengths[is_short])
        short["prefix"].append(ngram_hashes_at(hashes, starts[is_short], m))
        short["owners"].append(np.full(int(is_short.sum()), code, dtype=np.int32))
        tiny["grams"].append(whole[is_tiny])
        tiny["owners"].append(np.full(int(is_tiny.sum()), code, dtype=np.int32))
        summary[name] = {
            "texts": len(texts),
            "ngram_texts": int((lengths >= cfg.ngram).sum()),
            "short_texts": int(is_short.sum()),
            "whole_document_texts": int(is_tiny.sum()),
            "ngrams": len(g),
        }
    g = _cat(grams, np.uint64)
    order = np.argsort(g, kind="stable")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        grams=g[order],
        owners=_cat(gram_owner, np.int32)[order],
        short_grams=_cat(short["grams"], np.uint64),
        short_lengths=_cat(short["lengths"], np.int64),
        short_prefix=_cat(short["prefix"], np.uint64),
        short_owners=_cat(short["owners"], np.int32),
        tiny_grams=_cat(tiny["grams"], np.uint64),
        tiny_owners=_cat(tiny["owners"], np.int32),
        names=np.array([n for n, _ in owners], dtype=str),
    )
    return summary


def _cat(parts: list[np.ndarray], dtype: npt.DTypeLike) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


class HashSet:
    """Membership of 64-bit hashes: a sorted array, behind a table of 2^22 one-byte slots by the hash's top
    bits, so the binary search (random reads over the whole index) runs only for the few queries whose slot
    is taken, instead of for every n-gram of every document."""

    BITS = 22

    def __init__(self, values: np.ndarray) -> None:
        self.values = sorted_unique(values.astype(np.uint64))
        self.table = np.zeros(1 << self.BITS, dtype=bool)
        self.table[self.values >> np.uint64(64 - self.BITS)] = True

    def __len__(self) -> int:
        return len(self.values)

    def contains(self, queries: np.ndarray) -> np.ndarray:
        """Which ``queries`` are in the set."""
        found = self.table[queries >> np.uint64(64 - self.BITS)]
        if len(self.values) and found.any():
            maybe = np.flatnonzero(found)
            pos = np.searchsorted(self.values, queries[maybe]).clip(max=len(self.values) - 1)
            found[maybe] = self.values[pos] == queries[maybe]
        return found


class Decontaminator:
    """Checks documents against a saved index; counts removals per task/split."""

    def __init__(self, index_path: Path, cfg: DecontaminationConfig) -> None:
        data = np.load(index_path)
        self.grams, self.owners = data["grams"], data["owners"]
        self.gram_set = HashSet(self.grams)
        short_grams, lengths = data["short_grams"], data["short_lengths"]
        # short texts' whole-text hashes: owner by hash, and one set per length for the window lookups
        self.short = dict(zip(short_grams.tolist(), data["short_owners"].tolist(), strict=True))
        self.short_by_length = {int(k): HashSet(short_grams[lengths == k]) for k in np.unique(lengths)}
        self.short_prefix = HashSet(data["short_prefix"])
        self.tiny = dict(zip(data["tiny_grams"].tolist(), data["tiny_owners"].tolist(), strict=True))
        self.names = [str(n) for n in data["names"]]
        self.cfg = cfg
        self.removed = {name: {"documents": 0, "sentences": 0} for name in self.names}

    def _owner(self, hashes: np.ndarray, hit: np.ndarray) -> str:
        pos = np.searchsorted(self.grams, hashes[hit])
        return self.names[int(np.bincount(self.owners[pos]).argmax())]

    def check_batch(self, texts: list[str], words: WordBatch | None = None) -> list[str | None]:
        """Each text unchanged (the same object), with its contaminated sentences cut, or ``None`` when the
        whole document goes; a document's result does not depend on the others in the batch.

        ``words`` may pass in the texts' ``lower_words`` when the caller has them already. Documents that were
        cut are checked again (their remaining sentences may now run into a match) until none changes.
        """
        out: list[str | None] = list(texts)
        todo = np.arange(len(texts))
        batch = list(texts)  # the texts of the documents in ``todo``
        while len(todo):
            checked = self._check_once(batch, lower_words(batch) if words is None else words)
            words = None
            again, again_texts = [], []
            for i, before, after in zip(todo.tolist(), batch, checked, strict=True):
                out[i] = after
                if after is not None and after is not before:
                    again.append(i)
                    again_texts.append(after)
            todo = np.array(again, dtype=np.int64)
            batch = again_texts
        return out

    def _check_once(self, texts: list[str], words: WordBatch) -> list[str | None]:
        """One pass: all documents' n-grams and short-text windows are looked up at once; only documents with
        a match go through ``_cut``."""
        lengths, hashes = words.counts, words.hashes
        n = self.cfg.ngram
        grams, doc, _ = doc_ngrams(hashes, lengths, n)
        hit = self.gram_set.contains(grams)
        span_doc, span_start, span_len, span_owner = self._short_matches(hashes, lengths)
        suspect = np.zeros(len(texts), dtype=bool)
        suspect[doc[hit]] = True
        suspect[span_doc] = True
        out: list[str | None] = list(texts)
        offsets = words.offsets()
        for i, owner in self._whole_document_matches(hashes, lengths, offsets):
            self.removed[self.names[owner]]["documents"] += 1
            out[i], suspect[i] = None, False
        ends = np.cumsum(np.maximum(lengths - n + 1, 0))  # each document's n-grams, in order
        order = np.argsort(span_doc, kind="stable")
        span_doc, span_start, span_len, span_owner = (a[order] for a in (span_doc, span_start, span_len, span_owner))
        for i in np.flatnonzero(suspect).tolist():
            start = ends[i - 1] if i else 0
            a, b = np.searchsorted(span_doc, [i, i + 1])
            spans = list(
                zip(
                    (span_start[a:b] - offsets[i]).tolist(),
                    span_len[a:b].tolist(),
                    span_owner[a:b].tolist(),
                    strict=True,
                )
            )
            out[i] = self._cut(texts[i], grams[start : ends[i]], hit[start : ends[i]], spans)
        return out

    def _short_matches(self, hashes: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, ...]:
        """Every window of the documents equal to a short evaluation text: (document, first word, length,
        owner code) arrays."""
        found: list[tuple[np.ndarray, ...]] = []
        if len(self.short_prefix):
            m = self.cfg.min_words
            # positions starting like a short eval text (one lookup), then its whole k-gram at those only
            prefix, prefix_doc, prefix_pos = doc_ngrams(hashes, lengths, m)
            starting = self.short_prefix.contains(prefix)
            cand_doc, cand_pos = prefix_doc[starting], prefix_pos[starting]
            doc_end = np.cumsum(lengths)[cand_doc]
            for k, index in self.short_by_length.items():
                fits = cand_pos + k <= doc_end
                windows = ngram_hashes_at(hashes, cand_pos[fits], k)
                ok = index.contains(windows)
                owners = np.array([self.short[h] for h in windows[ok].tolist()], dtype=np.int64)
                found.append((cand_doc[fits][ok], cand_pos[fits][ok], np.full(int(ok.sum()), k), owners))
        if not found:
            return tuple(np.zeros(0, dtype=np.int64) for _ in range(4))
        return tuple(np.concatenate(col).astype(np.int64) for col in zip(*found, strict=True))

    def _whole_document_matches(
        self, hashes: np.ndarray, lengths: np.ndarray, offsets: np.ndarray
    ) -> list[tuple[int, int]]:
        """(document, owner code) of each document whose words are exactly a text under ``min_words`` words."""
        if not self.tiny:
            return []
        docs = np.flatnonzero((lengths > 0) & (lengths < self.cfg.min_words))
        out = []
        for k in np.unique(lengths[docs]).tolist():
            of_k = docs[lengths[docs] == k]
            for i, h in zip(of_k.tolist(), ngram_hashes_at(hashes, offsets[of_k], k).tolist(), strict=True):
                if h in self.tiny:
                    out.append((i, self.tiny[h]))
        return out

    def _cut(self, text: str, grams: np.ndarray, hit: np.ndarray, spans: list[tuple[int, int, int]]) -> str | None:
        """One document's result given its n-gram hashes, which of them hit the index, and the short-text
        matches in it (first word, length, owner code).

        Sentences never split a word (they break at whitespace), so the document's words are its sentences'
        words in a row and ``bounds`` places each sentence among the document's word positions.
        """
        if not hit.any() and not spans:
            return text
        owner = self._owner(grams, hit) if hit.any() else self.names[spans[0][2]]
        if len(grams) and hit.mean() >= self.cfg.max_overlap:
            self.removed[owner]["documents"] += 1
            return None
        pieces = _SENTENCE_SPLIT.split(text)
        sentences = pieces[0::2]
        bounds = lower_words(sentences).offsets()
        covered = np.zeros(bounds[-1] + 1, dtype=np.int64)
        starts = np.flatnonzero(hit)
        np.add.at(covered, starts, 1)
        np.add.at(covered, starts + self.cfg.ngram, -1)
        span_owner = np.full(bounds[-1], -1, dtype=np.int64)  # a cut sentence counts for the short text in it
        for first, length, code in spans:
            covered[first] += 1
            covered[first + length] -= 1
            span_owner[first : first + length] = code
        covered_words = np.cumsum(covered)[:-1] > 0
        keep: list[str] = []
        for i, sentence in enumerate(sentences):
            if covered_words[bounds[i] : bounds[i + 1]].any():
                codes = span_owner[bounds[i] : bounds[i + 1]]
                codes = codes[codes >= 0]
                self.removed[self.names[codes[0]] if len(codes) else owner]["sentences"] += 1
            elif sentence:
                keep.append(sentence + (pieces[2 * i + 1] if 2 * i + 1 < len(pieces) else ""))
        cleaned = "".join(keep).strip()
        if not cleaned:  # every sentence overlapped: the document is gone, count it as one
            self.removed[owner]["documents"] += 1
            return None
        return cleaned
