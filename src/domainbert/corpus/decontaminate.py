"""Decontamination: remove corpus text that overlaps the domain's evaluation sets.

Every text of the chosen splits (``corpus.decontamination.splits``, by default validation and test) of every
task in ``finetune.tasks`` is read by the small readers here (CoNLL: a sentence's tokens joined; JSONL,
optionally gzipped: the text field, and the pair field when set) and indexed as word n-gram hashes
(``ngram`` words, lowercase ``\\w+`` tokens; see ``words``). Eval texts shorter than ``ngram`` words (but
at least ``MIN_SHORT_WORDS``) are indexed whole.

The rule, per corpus document: if at least ``max_overlap`` of its n-grams hit the index, the whole document
is removed; otherwise every sentence (split at newlines and sentence-final punctuation) covered by a hit
n-gram, or equal to a short eval text, is cut out and the rest is kept. Removals are attributed to the
task/split owning most of the hits. Hub-hosted tasks (``format: hf``) are not read here (offline).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from domainbert.corpus.config import DecontaminationConfig
from domainbert.corpus.hashing import doc_ngrams, ngram_hashes, ngram_hashes_at, segment_hashes, sorted_unique
from domainbert.corpus.words import WordBatch, lower_words
from domainbert.errors import DataError

MIN_SHORT_WORDS = 4
_SENTENCE_SPLIT = re.compile(r"(\n+|(?<=[.!?])\s+)")


def _task_file(folder: Path, split: str, fmt: str) -> Path | None:
    candidates = {"conll": [f"{split}.conll", f"{split}.txt"], "jsonl": [f"{split}.jsonl.gz", f"{split}.jsonl"],
                  "csv": [f"{split}.csv"]}.get(fmt, [])
    return next((folder / c for c in candidates if (folder / c).is_file()), None)


def read_conll_sentences(path: Path) -> list[str]:
    """Sentences of a CoNLL file (``token<TAB>tag``, blank line between sentences) as space-joined tokens."""
    sentences, tokens = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("-DOCSTART-"):
                if tokens:
                    sentences.append(" ".join(tokens))
                tokens = []
                continue
            tokens.append(line.split("\t")[0].split(" ")[0])
    if tokens:
        sentences.append(" ".join(tokens))
    return sentences


def read_jsonl_texts(path: Path, text_field: str, pair_field: str | None) -> list[str]:
    """The text (and pair) field of each line of a JSONL(.gz) file; a bad line is a DataError naming it."""
    opener = gzip.open if path.name.endswith(".gz") else open
    texts = []
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                raise DataError("evaluation line is not JSON", file=path, line=lineno) from None
            for field in (text_field, pair_field):
                if field and isinstance(rec.get(field), str):
                    texts.append(rec[field])
    return texts


def eval_texts(tasks: list[Any], splits: list[str]) -> dict[str, list[str]]:
    """``{"task/split": [texts]}`` for the local tasks; hub tasks are skipped."""
    out: dict[str, list[str]] = {}
    for task in tasks:
        if task.format == "hf":
            continue
        for split in splits:
            path = _task_file(Path(task.path), split, task.format)
            if path is None:
                continue
            if task.format == "conll":
                out[f"{task.name}/{split}"] = read_conll_sentences(path)
            elif task.format == "jsonl":
                out[f"{task.name}/{split}"] = read_jsonl_texts(path, task.text_field, task.text_pair_field)
    return out


def build_index(tasks: list[Any], cfg: DecontaminationConfig, path: Path) -> dict[str, dict[str, int]]:
    """Index the evaluation texts into ``path`` (.npz); returns what was indexed per task/split."""
    owners = sorted(eval_texts(tasks, list(cfg.splits)).items())
    grams, gram_owner, short_owner, short_gram, short_len, short_prefix = [], [], [], [], [], []
    summary: dict[str, dict[str, int]] = {}
    for code, (name, texts) in enumerate(owners):
        words = lower_words(texts)  # all texts at once; n-grams per text
        lengths, hashes = words.counts, words.hashes
        g, doc, _ = doc_ngrams(hashes, lengths, cfg.ngram)
        grams.append(g)
        gram_owner.append(np.full(len(g), code, dtype=np.int32))
        starts = np.cumsum(lengths) - lengths
        n_short = 0
        for i in np.flatnonzero((lengths >= MIN_SHORT_WORDS) & (lengths < cfg.ngram)):
            h = hashes[starts[i]: starts[i] + lengths[i]]
            short_gram.append(ngram_hashes(h, len(h))[0])
            short_prefix.append(ngram_hashes(h[:MIN_SHORT_WORDS], MIN_SHORT_WORDS)[0])
            short_len.append(len(h))
            short_owner.append(code)
            n_short += 1
        summary[name] = {"texts": len(texts), "short_texts": n_short}
    g = np.concatenate(grams) if grams else np.zeros(0, dtype=np.uint64)
    o = np.concatenate(gram_owner) if gram_owner else np.zeros(0, dtype=np.int32)
    order = np.argsort(g, kind="stable")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, grams=g[order], owners=o[order], short_owners=np.array(short_owner, dtype=np.int32),
             short_grams=np.array(short_gram, dtype=np.uint64), short_lengths=np.array(short_len, dtype=np.int64),
             short_prefix=np.array(short_prefix, dtype=np.uint64),
             names=np.array([n for n, _ in owners]))
    for name in summary:
        summary[name]["ngrams"] = 0
    for code, (name, _) in enumerate(owners):
        summary[name]["ngrams"] = int((o == code).sum())
    return summary


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
        # short eval texts as whole-text n-gram hashes: by hash (owner) for _cut, by word count for check_batch
        self.short = dict(zip(short_grams.tolist(), data["short_owners"].tolist(), strict=True))
        self.short_by_length = {int(k): HashSet(short_grams[lengths == k]) for k in np.unique(lengths)}
        self.short_prefix = HashSet(data["short_prefix"])
        self.names = [str(n) for n in data["names"]]
        self.cfg = cfg
        self.removed = {name: {"documents": 0, "sentences": 0} for name in self.names}

    def _owner(self, hashes: np.ndarray, hit: np.ndarray) -> str:
        pos = np.searchsorted(self.grams, hashes[hit])
        return self.names[int(np.bincount(self.owners[pos]).argmax())]

    def check_batch(self, texts: list[str], words: WordBatch | None = None) -> list[str | None]:
        """``check`` for many documents: each text unchanged (the same object), cut, or ``None``.

        All documents' n-grams are looked up at once; only documents with a hit, or holding the words of a
        short evaluation text in a row (its k-gram, for each length k), go through ``_cut`` (a sentence's
        words are a run of its document's words, so no document is skipped that ``check`` would change).
        ``words`` may pass in the texts' ``lower_words`` when the caller has them already.
        """
        words = lower_words(texts) if words is None else words
        lengths, hashes = words.counts, words.hashes
        grams, doc, _ = doc_ngrams(hashes, lengths, self.cfg.ngram)
        hit = self.gram_set.contains(grams)
        suspect = np.zeros(len(texts), dtype=bool)
        suspect[doc[hit]] = True
        if len(self.short_prefix):
            # positions starting like a short eval text (one lookup), then its whole k-gram at those only
            prefix, prefix_doc, prefix_pos = doc_ngrams(hashes, lengths, MIN_SHORT_WORDS)
            found = self.short_prefix.contains(prefix)
            cand_doc, cand_pos = prefix_doc[found], prefix_pos[found]
            doc_end = np.cumsum(lengths)[cand_doc]
            for k, index in self.short_by_length.items():
                fits = cand_pos + k <= doc_end
                suspect[cand_doc[fits][index.contains(ngram_hashes_at(hashes, cand_pos[fits], k))]] = True
        ends = np.cumsum(np.maximum(lengths - self.cfg.ngram + 1, 0))  # each document's n-grams, in order
        out: list[str | None] = list(texts)
        for i in np.flatnonzero(suspect):
            start = ends[i - 1] if i else 0
            out[i] = self._cut(texts[i], grams[start: ends[i]], hit[start: ends[i]])
        return out

    def check(self, text: str) -> str | None:
        """The text with contaminated sentences removed, or ``None`` when the whole document goes."""
        grams = ngram_hashes(lower_words([text]).hashes, self.cfg.ngram)
        return self._cut(text, grams, self.gram_set.contains(grams))

    def _cut(self, text: str, grams: np.ndarray, hit: np.ndarray) -> str | None:
        """``check`` given the document's n-gram hashes and which of them hit the index.

        Sentences never split a word (they break at whitespace), so the document's words are its sentences'
        words in a row and ``bounds`` places each sentence in the n-gram positions.
        """
        pieces = _SENTENCE_SPLIT.split(text)
        sentences = pieces[0::2]
        sent_words = lower_words(sentences)
        bounds = sent_words.offsets()
        whole = segment_hashes(sent_words.hashes, bounds).tolist()  # each sentence as one k-gram
        short_hit = [self.short.get(h) if k >= MIN_SHORT_WORDS else None
                     for h, k in zip(whole, sent_words.counts.tolist(), strict=True)]
        if not hit.any() and all(s is None for s in short_hit):
            return text
        if len(grams) and hit.mean() >= self.cfg.max_overlap:
            self.removed[self._owner(grams, hit)]["documents"] += 1
            return None
        covered = np.zeros(bounds[-1] + 1, dtype=np.int64)
        starts = np.flatnonzero(hit)
        np.add.at(covered, starts, 1)
        np.add.at(covered, starts + self.cfg.ngram, -1)
        covered_words = np.cumsum(covered)[:-1] > 0
        keep: list[str] = []
        owner = self._owner(grams, hit) if hit.any() else None
        for i, sentence in enumerate(sentences):
            bad = short_hit[i] is not None or covered_words[bounds[i]:bounds[i + 1]].any()
            if bad:
                name = self.names[short_hit[i]] if short_hit[i] is not None else owner
                owner = owner or name
                self.removed[name]["sentences"] += 1
            elif sentence:
                keep.append(sentence + (pieces[2 * i + 1] if 2 * i + 1 < len(pieces) else ""))
        cleaned = "".join(keep).strip()
        if not cleaned:  # every sentence overlapped: the document is gone, count it as one
            self.removed[owner]["documents"] += 1
            return None
        return cleaned
