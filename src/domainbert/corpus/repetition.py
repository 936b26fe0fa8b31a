"""Gopher repetition filter (Rae et al. 2021, table A1), as datatrove implements it.

A document is dropped when too much of it repeats: duplicate paragraphs or lines (by count and by
characters), the most frequent 2-4-gram covering too many characters, or repeated 5-10-grams covering too
many characters. Thresholds are the paper's defaults and can be changed per domain. Words are whitespace
tokens (no language-specific word splitting).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import ClassVar

from pydantic import Field

from domainbert.corpus import filters
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


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(words[i:] for i in range(n)), strict=False))


def _repeated_chars(words: list[str], n: int) -> int:
    """Characters in n-grams seen before, skipping past each repeat (datatrove's find_all_duplicate)."""
    seen: set[tuple[str, ...]] = set()
    chars = idx = 0
    while idx < len(words) - n + 1:
        gram = tuple(words[idx: idx + n])
        if gram in seen:
            chars += sum(len(w) for w in gram)
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
        for n, frac in sorted(o.top_n_grams.items()):
            grams = _ngrams(words, n)
            if grams:
                gram, freq = Counter(grams).most_common(1)[0]
                if sum(len(w) for w in gram) * freq / size > frac:
                    return False, f"top_{n}_gram"
        # Fast path: when no n-gram of the smallest size repeats, no longer one can either.
        smallest = min(o.dup_n_grams, default=0)
        if smallest and len(set(_ngrams(words, smallest))) == max(len(words) - smallest + 1, 0):
            return True, ""
        for n, frac in sorted(o.dup_n_grams.items()):
            if _repeated_chars(words, n) / size > frac:
                return False, f"duplicated_{n}_n_grams"
        return True, ""
