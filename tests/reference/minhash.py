"""One document's MinHash shingles, what ``MinHasher.batch_shingles`` computes for a whole batch with one sort."""

from __future__ import annotations

import numpy as np

from domainbert.corpus.hashing import MinHasher, ngram_hashes, text_hash


def shingles(hasher: MinHasher, hashes: np.ndarray, fallback: str) -> np.ndarray:
    """32-bit shingle hashes of one document from its word ``hashes``, sorted and unique; a document shorter
    than ``hasher.ngram`` words is one shingle, the hash of ``fallback`` (its text)."""
    grams = ngram_hashes(hashes, hasher.ngram)
    if len(grams) == 0:
        grams = np.array([text_hash(fallback)], dtype=np.uint64)
    return np.unique(grams >> np.uint64(32))
