"""Stable, vectorised n-gram hashing shared by exact dedup, MinHash, decontamination and the Gopher rules.

Python's ``hash`` is salted per process, so everything here is built on fixed 64-bit arithmetic in numpy over
word hashes (``words``: a batch's words hashed at once): the same text gives the same numbers in every process
and on every run, which the byte-identical builds depend on. Decontamination and MinHash words are lowercase
``\\w+`` runs, so tokenisation and punctuation differences (an NER file's "U.S ." against the corpus "U.S.") do
not hide a match. The per-document paths these are tested against (regex words, CRC32 word hashes, one
document's shingles) are in ``tests/reference``.
"""

from __future__ import annotations

import hashlib

import numpy as np

from domainbert.corpus.words import WordBatch, sequence_keys, space_words
from domainbert.corpus.words import mix64 as _mix

_MIX = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)
_SEEDS = np.random.RandomState(20240611).randint(1, 2**31 - 1, size=64, dtype=np.int64).astype(np.uint64) * 2 + 1
MAX32 = np.uint64(0xFFFFFFFF)


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
            acc = acc[:m] + hashes[k : k + m] * _SEEDS[k % len(_SEEDS)] + np.uint64(k)
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
            acc += hashes[k : k + m] * _SEEDS[k % len(_SEEDS)] + np.uint64(k)
    return _mix(acc)


def segment_hashes(hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``ngram_hashes(hashes[a:b], b - a)[0]`` for every segment ``[a, b)`` of ``offsets`` at once (the hash
    of each segment as one n-gram; an empty segment gets the hash of no words)."""
    lengths = np.diff(offsets)
    k = np.arange(len(hashes), dtype=np.int64) - np.repeat(offsets[:-1], lengths)  # position in the segment
    with np.errstate(over="ignore"):
        terms = hashes * _SEEDS[k % len(_SEEDS)] + k.astype(np.uint64)
        sums = np.zeros(len(lengths), dtype=np.uint64)
        nonempty = lengths > 0
        sums[nonempty] = np.add.reduceat(terms, offsets[:-1][nonempty]) if len(terms) else sums[nonempty]
    return _mix(sums)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by sort and compare: numpy 2's hash-based ``unique`` is ~50x slower on uint64."""
    out = np.sort(values)
    if len(out) > 1:
        out = out[np.concatenate([[True], out[1:] != out[:-1]])]
    return out


def doc_ngrams(hashes: np.ndarray, lengths: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N-gram hashes of many documents whose word hashes are concatenated (``lengths`` words each).

    Returns ``(grams, doc, pos)``: the hashes of the n-grams that lie inside one document, in order (equal to
    ``ngram_hashes`` of each document's own words, concatenated), their document and their first word's
    position in ``hashes``.
    """
    ends = np.cumsum(lengths)
    doc_of = np.repeat(np.arange(len(lengths)), lengths)
    grams = ngram_hashes(hashes, n)
    pos = np.arange(len(grams))
    pos = pos[pos + n <= ends[doc_of[pos]]]
    return grams[pos], doc_of[pos], pos


def ngram_hashes_at(hashes: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """``ngram_hashes(hashes, n)[starts]``, computed only at ``starts`` (which must leave n words)."""
    acc = np.zeros(len(starts), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            acc += hashes[starts + k] * _SEEDS[k % len(_SEEDS)] + np.uint64(k)
    return _mix(acc)


def text_hash(text: str) -> int:
    """64-bit blake2b of a string (exact-duplicate keys, whole-sentence keys)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def exact_keys_and_word_counts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Exact-duplicate keys and whitespace word counts (``len(text.split())``) of many texts.

    The key hashes the sequence of the text's lowercased whitespace tokens, so documents that differ only in
    case, line breaks or spacing are duplicates; punctuation counts (near-dedup catches those).
    """
    words = space_words(texts, lowercase=True)
    return sequence_keys(words), words.counts


class MinHasher:
    """MinHash signatures (``num_perm`` uint32 values) of word n-gram shingles, computed for many docs at once.

    The hash functions are Dietzfelbinger's multiply-add-shift, ``((a * h + b) mod 2^64) >> 32`` for 32-bit
    shingles ``h`` and random 64-bit ``a``, ``b`` (a strongly universal family). datasketch uses
    ``(a * h + b) mod (2^61 - 1)``; the modulo is the slowest numpy operation here, and the wrap-around of
    64-bit arithmetic gives the same guarantees for 32-bit keys at less than half the cost.
    """

    def __init__(self, num_perm: int, ngram: int, seed: int = 1) -> None:
        rng = np.random.RandomState(seed)
        self.a = rng.randint(0, 2**63 - 1, size=num_perm, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(
            1
        )
        self.b = rng.randint(0, 2**63 - 1, size=num_perm, dtype=np.int64).astype(np.uint64)
        self.num_perm = num_perm
        self.ngram = ngram

    def batch_shingles(self, words: WordBatch, texts: list[str]) -> list[np.ndarray]:
        """32-bit shingle hashes of each document (sorted, unique), from their ``words.lower_words``; a document
        shorter than ``ngram`` words is one shingle, the hash of its text."""
        lengths = words.counts
        grams, doc, _ = doc_ngrams(words.hashes, lengths, self.ngram)
        short = np.flatnonzero(lengths < self.ngram)  # fewer words than a shingle: the whole text is one
        grams = np.concatenate([grams, np.array([text_hash(texts[i]) for i in short], dtype=np.uint64)])
        doc = np.concatenate([doc, short])
        # one sort of (document, shingle) keys gives every document's sorted unique shingles
        keys = sorted_unique((doc.astype(np.uint64) << np.uint64(32)) | (grams >> np.uint64(32)))
        bounds = np.searchsorted(keys >> np.uint64(32), np.arange(1, len(texts)), side="left")
        return np.split(keys & MAX32, bounds)

    def signatures(self, shingle_sets: list[np.ndarray], chunk: int = 5000) -> np.ndarray:
        """Signatures ``[len(shingle_sets), num_perm]`` (uint32), in chunks of about ``chunk`` shingles."""
        out = np.empty((len(shingle_sets), self.num_perm), dtype=np.uint32)
        start = 0
        while start < len(shingle_sets):
            stop, total = start, 0
            while stop < len(shingle_sets) and (total == 0 or total + len(shingle_sets[stop]) <= chunk):
                total += len(shingle_sets[stop])
                stop += 1
            block = np.concatenate(shingle_sets[start:stop])
            offsets = np.cumsum([0] + [len(s) for s in shingle_sets[start : stop - 1]])
            # [num_perm, shingles]: each hash function's values contiguous, so the per-document minima run
            # along rows (faster than reducing the transposed layout); in place, no temporaries
            perm = np.multiply(self.a[:, None], block[None, :])
            perm += self.b[:, None]
            perm >>= np.uint64(32)
            out[start:stop] = np.minimum.reduceat(perm, offsets, axis=1).T
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
