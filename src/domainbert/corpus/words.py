"""Word splitting and word hashing of many documents at once, in numpy over Unicode code points.

The corpus filters, decontamination, MinHash and exact dedup all start by cutting every document into words
and hashing them. Doing that per document in Python (``re.findall``, ``str.split``, a hash per word) was a
third of a shard's processing time; here a whole batch becomes one array of code points and the work is a
handful of vectorised passes:

* ``lower_words``: lowercase ``\\w+`` runs, the words of decontamination and MinHash (what
  ``re.findall(r"\\w+", text.lower())`` returns, word for word; tested against ``tests/reference/words.py``);
* ``space_words``: whitespace-separated tokens, the words of ``str.split()`` (Gopher's n-gram rules, word
  counts), case-sensitive or lowercased (exact-duplicate keys).

Character classes come from tables built once per process with numpy's string ufuncs over every code point,
which give exactly Python's ``str.isalnum`` (``\\w`` is alnum or ``_``), ``str.isspace`` and the first
character of ``str.lower`` (so only the rare one-to-many lowercasings, such as U+0130, hash differently
from a Python-side lowercase). A word's hash is a 64-bit polynomial hash of its lowercased code points,
made independent of where the word sits by multiplying with the inverse power, then mixed with its length:
the same word gives the same number in every document, process and run. This module does not decide what
to keep; it only counts and hashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

_BASE = 0x100000001B3 * 0x9E3779B1 & ((1 << 64) - 1) | 1  # odd: invertible modulo 2^64
_MIX = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)
_MASK64 = (1 << 64) - 1
_CASED_LIMIT = 0x20000  # no code point at or above this has a lowercase mapping


@dataclass
class WordBatch:
    """The words of a batch of documents, concatenated in document order.

    Attributes:
        hashes: one uint64 per word.
        counts: words per document (int64), ``sum(counts) == len(hashes)``.
        chars: characters per word (int64).
    """

    hashes: np.ndarray
    counts: np.ndarray
    chars: np.ndarray

    def offsets(self) -> np.ndarray:
        """``[0, cumsum(counts)]``: document ``i``'s words are ``hashes[offsets[i]:offsets[i + 1]]``."""
        return np.concatenate([[0], np.cumsum(self.counts)])

    def take(self, docs: np.ndarray) -> WordBatch:
        """The words of documents ``docs`` (indices, any order, repeats allowed), in that order."""
        docs = np.asarray(docs, dtype=np.int64)
        counts = self.counts[docs]
        starts = self.offsets()[:-1][docs]
        # each taken word's index: its document's start plus its rank within the document
        index = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        return WordBatch(self.hashes[index], counts, self.chars[index])

    @staticmethod
    def concat(parts: list[WordBatch]) -> WordBatch:
        """The documents of ``parts`` one after the other."""
        return WordBatch(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("hashes", "counts", "chars")))


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(is word char, is space, lowercase code point) for every code point, as Python's str methods say."""
    chars = np.arange(0x110000, dtype=np.uint32).view("<U1")
    is_word = np.strings.isalnum(chars)
    is_word[ord("_")] = True
    is_space = np.strings.isspace(chars)
    lower = np.arange(0x110000, dtype=np.uint32)
    # a one-to-many lowercasing (U+0130 -> "i\u0307") keeps its first character in a U1 result
    lower[:_CASED_LIMIT] = np.strings.lower(chars[:_CASED_LIMIT]).view(np.uint32)
    return is_word, is_space, lower


@lru_cache(maxsize=1)
def _inverse_base() -> int:
    inv = _BASE  # Newton's iteration for the inverse modulo 2^64 (each step doubles the correct bits)
    for _ in range(6):
        inv = inv * (2 - _BASE * inv) & _MASK64
    return inv


_POWERS: dict[str, np.ndarray] = {}


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``base^j`` and ``base^-j`` modulo 2^64 for j < n (cached and grown by doubling)."""
    if len(_POWERS.get("pow", ())) < n:
        size = max(n, 2 * len(_POWERS.get("pow", ())), 1 << 16)
        for key, value in (("pow", _BASE), ("inv", _inverse_base())):
            arr = np.full(size, value, dtype=np.uint64)
            arr[0] = 1
            _POWERS[key] = np.multiply.accumulate(arr)  # wraps modulo 2^64, as wanted
    return _POWERS["pow"][:n], _POWERS["inv"][:n]


def mix64(values: np.ndarray) -> np.ndarray:
    """A 64-bit finaliser (splitmix64-style) over an array of uint64: spreads every input bit over the output."""
    out = values.copy()
    out ^= out >> np.uint64(31)
    out *= _MUL
    out ^= out >> np.uint64(29)
    out *= _MIX
    out ^= out >> np.uint64(32)
    return out


def _code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """All texts' code points concatenated, and each text's length in code points."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    joined = "".join(texts).encode("utf-32-le", "surrogatepass")
    return np.frombuffer(joined, dtype=np.uint32), lengths


def _runs(inside: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end of every maximal run of True in ``inside`` that stays within one document, and the
    number of runs per document."""
    ends_of_docs = np.cumsum(lengths)
    first = (ends_of_docs - lengths)[lengths > 0]
    last = ends_of_docs[lengths > 0] - 1
    before = np.zeros_like(inside)
    before[1:] = inside[:-1]
    before[first] = False  # a run never continues across a document boundary
    after = np.zeros_like(inside)
    after[:-1] = inside[1:]
    after[last] = False
    starts = np.flatnonzero(inside & ~before)
    ends = np.flatnonzero(inside & ~after) + 1
    bounds = np.searchsorted(starts, np.concatenate([[0], ends_of_docs]))
    return starts, ends, np.diff(bounds)


def _hash_runs(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Position-independent 64-bit hash of each run ``values[start:end]`` (all runs at once)."""
    power, inverse = _powers(len(values) + 1)
    prefix = np.zeros(len(values) + 1, dtype=np.uint64)
    np.cumsum(values.astype(np.uint64) * power[: len(values)], out=prefix[1:])
    raw = (prefix[ends] - prefix[starts]) * inverse[starts]
    return mix64(raw ^ (ends - starts).astype(np.uint64) * _MIX)


def lower_words(texts: list[str]) -> WordBatch:
    """Lowercase ``\\w+`` words of each text (``re.findall(r"\\w+", text.lower())``), hashed."""
    is_word, _, lower = _tables()
    cps, lengths = _code_points(texts)
    starts, ends, counts = _runs(is_word[cps], lengths)
    return WordBatch(_hash_runs(lower[cps], starts, ends), counts, ends - starts)


def space_words(texts: list[str], lowercase: bool = False) -> WordBatch:
    """Whitespace-separated tokens of each text (``str.split()``), hashed as written or lowercased."""
    _, is_space, lower = _tables()
    cps, lengths = _code_points(texts)
    starts, ends, counts = _runs(~is_space[cps], lengths)
    return WordBatch(_hash_runs(lower[cps] if lowercase else cps, starts, ends), counts, ends - starts)


def sequence_keys(words: WordBatch) -> np.ndarray:
    """One 64-bit key per document from its word hashes in order (equal word sequences, equal keys)."""
    offsets = words.offsets()
    return _hash_runs(words.hashes, offsets[:-1], offsets[1:])
