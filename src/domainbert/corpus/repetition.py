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

from domainbert.corpus import filters
from domainbert.corpus.hashing import ngram_hashes_upto, word_hashes
from domainbert.schema import StrictModel

_PARAS = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")


class GopherOptions(StrictModel):
    dup_line_frac: float = Field(0.3, ge=0, le=1)
    dup_para_frac: float = Field(0.3, ge=0, le=1)
    dup_line_char_frac: float = Field(0.2, ge=0, le=1)
    dup_para_char_frac: float = Field(0.2, ge=0, le=1)
    top_n_grams: dict[int, float] = Field(default_factory=lambda: {2: 0.2, 3: 0.18, 4: 0.16})
    dup_n_grams: dict[int, float] = Field(default_factory=lambda: {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11,
                                                                   10: 0.10})
    ngram_min_words: int = Field(50, ge=0, description="Apply the n-gram rules only to documents of at least "
                                 "this many words (a short definition naturally repeats its subject).")


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


class GopherRepetition(filters.Component):
    """Gopher's repetition rules; the reason names the first rule that fired."""

    name: ClassVar[str] = "gopher_repetition_v1"
    kind = "filter"
    Options = GopherOptions

    def filter(self, text: str) -> tuple[bool, str]:
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
        words = text.split()
        if len(words) < max(o.ngram_min_words, 1):
            return True, ""
        hashes = word_hashes(words)
        family = ngram_hashes_upto(hashes, max([*o.top_n_grams, *o.dup_n_grams], default=1))
        cum = np.concatenate([[0], np.cumsum([len(w) for w in words])])
        for n, frac in sorted(o.top_n_grams.items()):
            grams = family[n]
            if len(grams):
                # The most frequent n-gram (ties: the one seen first), as Counter.most_common(1) picks it.
                uniq, first, freq = np.unique(grams, return_index=True, return_counts=True)
                best = first[freq == freq.max()].min()
                if freq.max() > 1 and (cum[best + n] - cum[best]) * freq.max() / size > frac:
                    return False, f"top_{n}_gram"
        for n, frac in sorted(o.dup_n_grams.items()):
            grams = family[n]
            if not len(grams):
                continue
            # Upper bound first: the greedy scan can only count n-grams that occurred earlier, so when even
            # all of those together stay under the threshold the (Python) scan is skipped.
            _, first = np.unique(grams, return_index=True)
            repeat = np.ones(len(grams), dtype=bool)
            repeat[first] = False
            starts = np.flatnonzero(repeat)
            if (cum[starts + n] - cum[starts]).sum() / size <= frac:
                continue
            if _repeated_chars(grams.tolist(), cum.tolist(), n) / size > frac:
                return False, f"duplicated_{n}_n_grams"
        return True, ""
