"""Per-document words and word hashes: Python's regex and CRC32, what ``domainbert.corpus.words`` computes for
a whole batch in numpy.

``words_of`` is the definition of a decontamination and MinHash word (a lowercase ``\\w+`` run); ``word_hashes``
hashes a Python word list with CRC32, a hash family independent of the package's polynomial word hash, so a
reference built on it shares no hashing code with the path under test (``ngram_hashes`` and friends combine
whatever word hashes they are given).
"""

from __future__ import annotations

import re
import zlib

import numpy as np

_WORD = re.compile(r"\w+")


def words_of(text: str) -> list[str]:
    """Lowercase word tokens (``\\w+``)."""
    return _WORD.findall(text.lower())


def word_hashes(words: list[str]) -> np.ndarray:
    """CRC32 of each word as uint64."""
    return np.fromiter((zlib.crc32(w.encode()) for w in words), dtype=np.uint64, count=len(words))
