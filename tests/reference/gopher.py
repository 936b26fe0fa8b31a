"""Gopher repetition, one document at a time: the rules as ``GopherRepetition`` states them, which its
vectorised ``filter_batch`` must agree with (verdict and reason) on every document.

The line and paragraph rules are the component's own (``_line_rules``: per document in both paths); the n-gram
rules here hash words with CRC32 (``reference.words``), not the package's word hash, and look at one document's
n-grams at a time with ``np.unique`` instead of one sort over the whole batch.
"""

from __future__ import annotations

import numpy as np

from domainbert.corpus.hashing import ngram_hashes_upto
from domainbert.corpus.repetition import GopherOptions, GopherRepetition, _repeated_chars
from reference.words import word_hashes


def gopher_filter(gopher: GopherRepetition, text: str) -> tuple[bool, str]:
    """``(keep, reason)`` for one document, rule by rule; the reason names the first rule that fired."""
    verdict = gopher._line_rules(text)
    if verdict is not None:
        return verdict
    words = text.split()
    if len(words) < max(gopher.options.ngram_min_words, 1):
        return True, ""
    return _ngram_rules(gopher.options, text, words)


def _ngram_rules(o: GopherOptions, text: str, words: list[str]) -> tuple[bool, str]:
    size = max(len(text), 1)
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
        # Upper bound first: the greedy scan can only count n-grams that occurred earlier, so when even all
        # of those together stay under the threshold the scan is skipped.
        _, first = np.unique(grams, return_index=True)
        repeat = np.ones(len(grams), dtype=bool)
        repeat[first] = False
        starts = np.flatnonzero(repeat)
        if (cum[starts + n] - cum[starts]).sum() / size <= frac:
            continue
        if _repeated_chars(grams.tolist(), cum.tolist(), n) / size > frac:
            return False, f"duplicated_{n}_n_grams"
    return True, ""
