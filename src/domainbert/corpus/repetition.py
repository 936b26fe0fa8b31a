"""Gopher repetition filter (Rae et al. 2021, table A1), as datatrove implements it.

A document is dropped when too much of it repeats: duplicate paragraphs or lines (by count and by
characters), the most frequent 2-4-gram covering too many characters, or repeated 5-10-grams covering too
many characters. Thresholds are the paper's defaults and can be changed per domain. Words are whitespace
tokens (no language-specific word splitting); an n-gram's length is the characters of its words (datatrove
also counts the spaces between them). N-grams are compared by 64-bit hashes (``hashing``), vectorised.
Two departures from datatrove, for short documents: the top n-gram rule needs an n-gram that occurs at least
twice (datatrove also fires on a unique 4-gram filling 16% of a 20-word text), and the n-gram rules apply only
from ``ngram_min_words`` words (Gopher's own quality filter drops documents under 50 words anyway).
"""

from __future__ import annotations

import re
from typing import ClassVar

import numpy as np
from pydantic import Field

from domainbert.config.schema import StrictModel
from domainbert.corpus.components import Component, register
from domainbert.corpus.hashing import ngram_hashes_upto
from domainbert.corpus.words import WordBatch, space_words

_PARAS = re.compile(r"\n{2,}")
_SALT = np.uint64(0x9E3779B97F4A7C15)  # spreads document numbers over the 64-bit n-gram key space
_LINES = re.compile(r"\n+")


class GopherOptions(StrictModel):
    dup_line_frac: float = Field(0.3, ge=0, le=1)
    dup_para_frac: float = Field(0.3, ge=0, le=1)
    dup_line_char_frac: float = Field(0.2, ge=0, le=1)
    dup_para_char_frac: float = Field(0.2, ge=0, le=1)
    top_n_grams: dict[int, float] = Field(default_factory=lambda: {2: 0.2, 3: 0.18, 4: 0.16})
    dup_n_grams: dict[int, float] = Field(
        default_factory=lambda: {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
    )
    ngram_min_words: int = Field(
        50,
        ge=0,
        description="Apply the n-gram rules only to documents of at least "
        "this many words (a short definition naturally repeats its subject).",
    )


def _duplicates(items: list[str]) -> tuple[int, int]:
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


def _repeated_chars(grams: list[int], cum: list[int], n: int) -> int:
    """Characters in n-grams seen before, skipping past each repeat (datatrove's find_all_duplicate).

    ``grams`` are the n-gram hashes by position and ``cum`` the prefix sums of word lengths, so the loop
    touches only Python ints (several times faster than building tuples of words).
    """
    seen: set[int] = set()
    chars = idx = 0
    last = len(grams)
    while idx < last:
        gram = grams[idx]
        if gram in seen:
            chars += cum[idx + n] - cum[idx]
            idx += n
        else:
            seen.add(gram)
            idx += 1
    return chars


@register
class GopherRepetition(Component[GopherOptions]):
    """Gopher's repetition rules; the reason names the first rule that fired."""

    name: ClassVar[str] = "gopher_repetition_v1"
    kind = "filter"
    Options = GopherOptions

    def filter(self, text: str) -> tuple[bool, str]:
        return self.filter_batch([text])[0]

    def filter_batch(self, texts: list[str]) -> list[tuple[bool, str]]:
        """Every document's verdict; the n-gram rules run on all long documents at once.

        The rules one document at a time, which this must agree with, are ``tests/reference/gopher.py``.
        """
        by_lines = [self._line_rules(t) for t in texts]
        rest = [i for i, r in enumerate(by_lines) if r is None]
        # the verdicts of the documents no line rule decided, by document index
        verdicts: dict[int, tuple[bool, str]] = {}
        words = space_words([texts[i] for i in rest])
        long_mask = words.counts >= max(self.options.ngram_min_words, 1)
        for i in np.asarray(rest, dtype=np.int64)[~long_mask].tolist():
            verdicts[i] = (True, "")
        if long_mask.any():
            long_docs = [i for i, is_long in zip(rest, long_mask.tolist(), strict=True) if is_long]
            take = np.repeat(long_mask, words.counts)  # the words of the long documents
            subset = WordBatch(words.hashes[take], words.counts[long_mask], words.chars[take])
            for i, verdict in zip(
                long_docs, _batch_ngram_rules(self.options, [texts[i] for i in long_docs], subset), strict=True
            ):
                verdicts[i] = verdict
        return [verdicts[i] if r is None else r for i, r in enumerate(by_lines)]

    def _line_rules(self, text: str) -> tuple[bool, str] | None:
        if "\n" not in text:  # one paragraph of one line: nothing can repeat
            return None
        o = self.options
        size = max(len(text), 1)
        paras = _PARAS.split(text.strip())
        count, chars = _duplicates(paras)
        if count / len(paras) > o.dup_para_frac:
            return False, "dup_para_frac"
        if chars / size > o.dup_para_char_frac:
            return False, "dup_para_char_frac"
        lines = _LINES.split(text)
        count, chars = _duplicates(lines)
        if count / len(lines) > o.dup_line_frac:
            return False, "dup_line_frac"
        if chars / size > o.dup_line_char_frac:
            return False, "dup_line_char_frac"
        return None


def _top_fired(
    gdoc: np.ndarray, freq: np.ndarray, first: np.ndarray, cum: np.ndarray, size: np.ndarray, n: int, frac: float
) -> np.ndarray:
    """Documents whose most frequent n-gram (first seen on ties) covers more than ``frac`` of their characters."""
    ndocs = len(size)
    top = np.zeros(ndocs, dtype=np.int64)
    np.maximum.at(top, gdoc, freq)
    tied = freq == top[gdoc]
    best = np.full(ndocs, len(cum), dtype=np.int64)
    np.minimum.at(best, gdoc[tied], first[tied])
    # only documents with a repeated n-gram get a ``best`` to index ``cum`` with (a batch of documents
    # all shorter than n words has no position that could stand in for the others)
    fired = top > 1
    at = best[fired]
    fired[fired] = (cum[at + n] - cum[at]) * top[fired] / size[fired] > frac
    return fired


def _dup_fired(
    bound: np.ndarray,
    reasons: list[str | None],
    grams_n: np.ndarray,
    cum: np.ndarray,
    spans: tuple[np.ndarray, np.ndarray],
    size: np.ndarray,
    n: int,
    frac: float,
) -> np.ndarray:
    """Documents whose duplicated n-grams cover more than ``frac``: the greedy scan, only where the upper
    ``bound`` says it could fire and no earlier rule has."""
    starts, ends = spans
    fired = np.zeros(len(size), dtype=bool)
    for d in np.flatnonzero(bound / size > frac):
        if reasons[d] is None:
            grams = grams_n[starts[d] : ends[d] - n + 1].tolist()
            fired[d] = _repeated_chars(grams, cum[starts[d] : ends[d] + 1].tolist(), n) / size[d] > frac
    return fired


def _batch_ngram_rules(o: GopherOptions, texts: list[str], words: WordBatch) -> list[tuple[bool, str]]:
    """The n-gram rules for many documents at once, over their words concatenated.

    Each n-gram gets a key mixing its hash with its document's number; one sort per n groups equal n-grams of
    a document, which gives each document's most frequent n-gram (first seen on ties) and the characters of
    its repeated n-grams (an upper bound of what the greedy scan counts); only documents over that bound get
    the greedy Python scan. A repeated (n+1)-gram starts with a repeated n-gram, so each rule only looks at
    the documents that repeated some n-gram in the rules before it (when its n is not shorter). Rules are
    checked in order (top n-grams, then duplicated n-grams, each by n), so a document gets the reason of the
    first rule that fires, as one checked alone would.
    """
    ndocs, lens = len(texts), words.counts
    cum = np.concatenate([[0], np.cumsum(words.chars)])
    ends = np.cumsum(lens)
    starts, doc_of = ends - lens, np.repeat(np.arange(ndocs), lens)
    doc_salt = doc_of.astype(np.uint64) * _SALT
    size = np.array([max(len(t), 1) for t in texts], dtype=np.float64)
    family = ngram_hashes_upto(words.hashes, max([*o.top_n_grams, *o.dup_n_grams], default=1))
    reasons: list[str | None] = [None] * ndocs
    repeating = np.ones(ndocs, dtype=bool)  # documents that may still hold a repeated n-gram
    rules = [("top", n, f) for n, f in sorted(o.top_n_grams.items())] + [
        ("dup", n, f) for n, f in sorted(o.dup_n_grams.items())
    ]
    remaining = ends[doc_of] - np.arange(len(doc_of))  # words from each position to its document's end
    repeating_n = 0  # ``repeating`` holds for n-grams of at least this length
    for kind, n, frac in rules:
        inside = remaining[: len(family[n])] >= n  # the n-gram ends within its document
        if n >= repeating_n:  # a repeated n-gram starts with a repeated shorter one
            inside &= repeating[doc_of[: len(family[n])]]
        pos = np.flatnonzero(inside)
        key = family[n][pos] ^ doc_salt[pos]
        order = np.argsort(key)
        pos, key = pos[order], key[order]
        new = np.ones(len(pos), dtype=bool)
        new[1:] = key[1:] != key[:-1]
        group = np.flatnonzero(new)
        freq = np.diff(np.append(group, len(pos)))
        first = np.minimum.reduceat(pos, group) if len(group) else group
        # only n-grams seen more than once can make a rule fire: the rest of the work is on those few groups
        multi = freq > 1
        if kind == "dup":
            chars = cum[pos + n] - cum[pos]
            group_chars = np.add.reduceat(chars, group)[multi] if len(group) else chars
        group, freq, first = group[multi], freq[multi], first[multi]
        gdoc = doc_of[pos[group]]
        if n >= repeating_n:
            has_repeat = np.zeros(ndocs, dtype=bool)
            has_repeat[gdoc] = True
            repeating &= has_repeat
            repeating_n = n
        if kind == "top":
            fired = _top_fired(gdoc, freq, first, cum, size, n, frac)
        else:
            # everything but each group's first occurrence: the n-grams seen earlier in the document
            bound = np.bincount(gdoc, weights=group_chars - (cum[first + n] - cum[first]), minlength=ndocs)
            fired = _dup_fired(bound, reasons, family[n], cum, (starts, ends), size, n, frac)
        for d in np.flatnonzero(fired):
            if reasons[d] is None:
                reasons[d] = f"top_{n}_gram" if kind == "top" else f"duplicated_{n}_n_grams"
    return [(True, "") if r is None else (False, r) for r in reasons]
