"""How a tokenizer cuts held-out domain text: fertility, split shares, UNK rate, sequence length.

A *word* is what BERT's pre-tokeniser yields on the raw text (runs of letters/digits, each punctuation mark
alone), whatever tokenizer is measured, so every tokenizer is scored on the same words. Each token is assigned
to the word its character span overlaps first (offsets come from the tokenizer), so a token spanning several
words (SentencePiece's ``://``) costs the first one; tokens overlapping no word (a bare SentencePiece space
marker) count toward the sequence length only. Special tokens are never added.

- fertility: tokens assigned to words / words (1.0 = every word is one token);
- split_2plus / split_3plus: share of words cut into 2+ / 3+ tokens;
- unk_rate: share of all tokens that are the UNK token; unk_word_rate: share of words holding one;
- mean_tokens_per_document: the sequence length a document costs (what a shorter vocabulary saves).

It also counts words and token frequencies over a split (for the fragmented-words and missing-tokens tables
and the extension candidates). It does not decide anything.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator

import numpy as np
from tokenizers import Tokenizer, pre_tokenizers

from domainbert.vocab.reference_vocabs import TokenizerInfo

_WORDS = pre_tokenizers.BertPreTokenizer()


def words_with_spans(text: str) -> list[tuple[str, tuple[int, int]]]:
    """BERT's pre-tokenisation of the raw text: ``(word, (start, end))`` in characters."""
    return _WORDS.pre_tokenize_str(text)


def _batches(items: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def heldout_stats(info: TokenizerInfo, texts: list[str]) -> dict[str, float]:
    """Fertility, split shares, UNK rates and mean tokens per document of ``info`` on ``texts``."""
    unk = info.unk_id
    words = tokens = pieces = split2 = split3 = unk_tokens = unk_words = 0
    for batch in _batches(texts, 256):
        encodings = info.tokenizer.encode_batch(batch, add_special_tokens=False)
        for text, enc in zip(batch, encodings, strict=True):
            spans = [s for _, s in words_with_spans(text)]
            ends = [e for _, e in spans]
            per_word = [0] * len(spans)
            unk_in = [False] * len(spans)
            tokens += len(enc.ids)
            for tid, (s, e) in zip(enc.ids, enc.offsets, strict=True):
                if unk is not None and tid == unk:
                    unk_tokens += 1
                i = bisect_right(ends, s)
                if i < len(spans) and spans[i][0] < max(e, s + 1):
                    per_word[i] += 1
                    unk_in[i] = unk_in[i] or (unk is not None and tid == unk)
            for n, u in zip(per_word, unk_in, strict=True):
                # n == 0: the word shares a token with the word before it (SentencePiece "://") or was removed
                # by the normaliser; it counts as a word that costs no extra token
                words += 1
                pieces += n
                split2 += n >= 2
                split3 += n >= 3
                unk_words += u
    docs = max(len(texts), 1)
    return {
        "documents": len(texts),
        "words": words,
        "tokens": tokens,
        "fertility": pieces / words if words else 0.0,
        "split_2plus": split2 / words if words else 0.0,
        "split_3plus": split3 / words if words else 0.0,
        "unk_rate": unk_tokens / tokens if tokens else 0.0,
        "unk_word_rate": unk_words / words if words else 0.0,
        "mean_tokens_per_document": tokens / docs,
    }


# BERT's pre-tokenisation as a regex (runs of letters and digits; each other non-space character alone),
# faster than calling the pre-tokeniser per document; it differs only on non-ASCII symbols (BERT keeps
# a symbol that is not punctuation, such as "\u20ac", attached to its neighbours).
_WORD_RE = re.compile(r"[^\W_]+|[^\w\s]|_")


def count_words(texts: Iterable[str]) -> Counter:
    """Word frequencies (BERT-style pre-tokenisation, case kept) over ``texts``."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(_WORD_RE.findall(text))
    return counts


def normalized_counts(counts: Counter, tok: Tokenizer) -> Counter:
    """Merge word counts under a tokenizer's normaliser (``Hello`` and ``hello`` for an uncased one)."""
    if tok.normalizer is None:
        return Counter(counts)
    out: Counter = Counter()
    norm = tok.normalizer.normalize_str
    for word, n in counts.items():
        w = norm(word).strip()
        if w and not any(c.isspace() for c in w):
            out[w] += n
    return out


def pieces(info: TokenizerInfo, words: list[str]) -> list[list[str]]:
    """The tokens each word is cut into (each word encoded alone, as its word-initial form)."""
    if not words:
        return []
    return [enc.tokens for enc in info.tokenizer.encode_batch(words, add_special_tokens=False)]


def token_counts_from_words(tok: Tokenizer, counts: Counter) -> np.ndarray:
    """Token frequencies from word frequencies: each distinct word encoded once (exact for WordPiece, whose
    pieces depend on the word alone)."""
    out = np.zeros(tok.get_vocab_size(with_added_tokens=True), dtype=np.int64)
    words = list(counts)
    for start in range(0, len(words), 4096):
        batch = words[start : start + 4096]
        for word, enc in zip(batch, tok.encode_batch(batch, add_special_tokens=False), strict=True):
            for i in enc.ids:
                out[i] += counts[word]
    return out


def token_counts(tok: Tokenizer, texts: Iterable[str]) -> np.ndarray:
    """How often each token id occurs when ``tok`` encodes ``texts`` (no special tokens)."""
    counts = np.zeros(tok.get_vocab_size(with_added_tokens=True), dtype=np.int64)
    for batch in _batches(texts, 512):
        ids = [i for enc in tok.encode_batch(batch, add_special_tokens=False) for i in enc.ids]
        if ids:
            counts += np.bincount(np.asarray(ids, dtype=np.int64), minlength=len(counts))[: len(counts)]
    return counts
