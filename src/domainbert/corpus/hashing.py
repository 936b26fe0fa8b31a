"""Stable, vectorised text hashing shared by exact dedup, MinHash and decontamination.

Python's ``hash`` is salted per process, so everything here is built on CRC32 word hashes and fixed 64-bit
arithmetic in numpy: the same text gives the same numbers in every process and on every run, which the
byte-identical builds depend on. Words are lowercase ``\\w+`` runs, so tokenisation and punctuation
differences (an NER file's "U.S ." against the corpus "U.S.") do not hide a match.
"""

from __future__ import annotations

import hashlib
import re
import zlib

import numpy as np

_WORD = re.compile(r"\w+")
_MIX = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)
_SEEDS = np.random.RandomState(20240611).randint(1, 2**31 - 1, size=64, dtype=np.int64).astype(np.uint64) * 2 + 1
MERSENNE = np.uint64((1 << 61) - 1)
MAX32 = np.uint64(0xFFFFFFFF)


def words_of(text: str) -> list[str]:
    """Lowercase word tokens (``\\w+``)."""
    return _WORD.findall(text.lower())


class _WordCache(dict):
    """word -> CRC32; a missing word is hashed on first use (``map(cache.__getitem__)`` stays in C)."""

    def __missing__(self, word: str) -> int:
        value = self[word] = zlib.crc32(word.encode())
        return value


_CACHE = _WordCache()
_CACHE_MAX = 200_000


def word_hashes(words: list[str]) -> np.ndarray:
    """CRC32 of each word as uint64 (a per-process cache of frequent words skips most of the encoding)."""
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.clear()
    return np.fromiter(map(_CACHE.__getitem__, words), dtype=np.uint64, count=len(words))


def _mix(acc: np.ndarray) -> np.ndarray:
    out = acc.copy()
    with np.errstate(over="ignore"):
        out ^= out >> np.uint64(31)
        out *= _MUL
        out ^= out >> np.uint64(29)
        out *= _MIX
        out ^= out >> np.uint64(32)
    return out


def ngram_hashes_upto(hashes: np.ndarray, max_n: int) -> dict[int, np.ndarray]:
    """``{n: ngram_hashes(hashes, n)}`` for n = 1..max_n, built incrementally (one add per extra word)."""
    out: dict[int, np.ndarray] = {}
    acc = np.zeros(len(hashes), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(max_n):
            m = len(hashes) - k
            if m <= 0:
                out[k + 1] = np.zeros(0, dtype=np.uint64)
                continue
            acc = acc[:m] + hashes[k: k + m] * _SEEDS[k % len(_SEEDS)] + np.uint64(k)
            out[k + 1] = _mix(acc)
    return out


def ngram_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """64-bit hashes of every word n-gram (position-sensitive combination, then a mixing step)."""
    m = len(hashes) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    acc = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            acc += hashes[k: k + m] * _SEEDS[k % len(_SEEDS)] + np.uint64(k)
    return _mix(acc)


def text_hash(text: str) -> int:
    """64-bit blake2b of a string (exact-duplicate keys, whole-sentence keys)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def normalized_key(words: list[str], text: str) -> int:
    """Exact-duplicate key: the lowercase words joined by spaces (the raw text when it has no words)."""
    return text_hash(" ".join(words) if words else text)


class MinHasher:
    """MinHash signatures (``num_perm`` uint32 values) of word n-gram shingles, computed for many docs at once.

    Permutations are ``(a * h + b) mod (2^61 - 1)`` truncated to 32 bits, as in datasketch, with
    ``a, b < 2^32`` so the product never overflows 64 bits.
    """

    def __init__(self, num_perm: int, ngram: int, seed: int = 1) -> None:
        rng = np.random.RandomState(seed)
        self.a = rng.randint(1, 2**32 - 1, size=num_perm, dtype=np.int64).astype(np.uint64)
        self.b = rng.randint(0, 2**32 - 1, size=num_perm, dtype=np.int64).astype(np.uint64)
        self.num_perm = num_perm
        self.ngram = ngram

    def shingles(self, hashes: np.ndarray, fallback: str) -> np.ndarray:
        """32-bit shingle hashes of one document; a document shorter than ``ngram`` is one shingle."""
        grams = ngram_hashes(hashes, self.ngram)
        if len(grams) == 0:
            grams = np.array([text_hash(fallback)], dtype=np.uint64)
        return np.unique(grams >> np.uint64(32))

    def signatures(self, shingle_sets: list[np.ndarray], chunk: int = 20000) -> np.ndarray:
        """Signatures ``[len(shingle_sets), num_perm]`` (uint32), in chunks of about ``chunk`` shingles."""
        out = np.empty((len(shingle_sets), self.num_perm), dtype=np.uint32)
        start = 0
        while start < len(shingle_sets):
            stop, total = start, 0
            while stop < len(shingle_sets) and (total == 0 or total + len(shingle_sets[stop]) <= chunk):
                total += len(shingle_sets[stop])
                stop += 1
            block = np.concatenate(shingle_sets[start:stop])
            offsets = np.cumsum([0] + [len(s) for s in shingle_sets[start:stop - 1]])
            perm = (block[:, None] * self.a[None, :] + self.b[None, :]) % MERSENNE & MAX32
            out[start:stop] = np.minimum.reduceat(perm, offsets, axis=0).astype(np.uint32)
            start = stop
        return out


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """LSH band keys ``[n, bands]`` (uint64): each band's ``rows`` signature values combined into one hash."""
    sig = signatures.astype(np.uint64)
    keys = np.zeros((len(sig), bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for b in range(bands):
            acc = np.full(len(sig), np.uint64(b + 1) * _MIX, dtype=np.uint64)
            for r in range(rows):
                acc = (acc ^ sig[:, b * rows + r]) * _MUL
                acc ^= acc >> np.uint64(29)
            keys[:, b] = acc
    return keys
