"""The general-domain control text: an equal amount of general English, spread evenly over its files.

Raw overlap with BERT's vocabulary mixes domain shift with corpus size (a vocabulary trained on little text
holds more rare whole words and fewer common pieces). The control vocabulary is trained on as many words of
general text as the domain vocabulary saw, so the difference between the two overlaps is the domain's. When
the domain has more text than the control, a domain vocabulary is also trained on an evenly spread sample of
the same size (``take_words``). Control files are JSONL (``text`` field, optionally gzip) or plain text, one
document a line. This module does not train tokenizers.
"""

from __future__ import annotations

import glob
import gzip
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from domainbert.core.errors import DataError
from domainbert.core.jsonl import iter_texts


def control_files(patterns: list[str]) -> list[Path]:
    """The files the ``vocab.control_corpus`` globs match, sorted; no match is an error."""
    files: list[Path] = []
    for pattern in patterns:
        matched = sorted(glob.glob(pattern))
        if not matched:
            raise DataError("control corpus: no file matches", file=pattern, field="vocab.control_corpus")
        files.extend(Path(m) for m in matched)
    return files


def iter_control_texts(files: list[Path]) -> Iterator[str]:
    """Stream the documents of the control files."""
    for path in files:
        if ".jsonl" in path.name or ".json" in path.name:
            yield from (text for text in iter_texts([path]) if text)
            continue
        with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f if line.strip())


def count_words(texts: Iterable[str]) -> tuple[int, int]:
    """Documents and whitespace words of ``texts``."""
    docs = words = 0
    for text in texts:
        docs += 1
        words += len(text.split())
    return docs, words


def take_words(make_texts: Callable[[], Iterable[str]], total_words: int, target_words: int) -> Iterator[str]:
    """About ``target_words`` words of the texts, taken evenly along them (every k-th document, k fractional).

    Args:
        make_texts: returns a fresh iterator over the texts.
        total_words: the words in all of them (``count_words``).
        target_words: how many to keep; all when it is not smaller than ``total_words``.
    """
    if target_words >= total_words:
        yield from make_texts()
        return
    ratio = target_words / total_words
    seen = kept = 0
    for text in make_texts():
        n = len(text.split())
        seen += n
        # keep a document whenever the kept words fall behind the target share of those seen so far
        if kept < ratio * seen:
            kept += n
            yield text
        if kept >= target_words:
            return
