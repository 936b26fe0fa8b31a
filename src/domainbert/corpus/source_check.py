"""Local corpus sources before a run reads them: a sample checked (``domainbert validate``), and the most
tokens their files can hold (``plan`` and ``validate`` weigh the budget against it before the corpus exists)
and the most words (``validate`` weighs the domain vocabulary's size against it, ``vocab_size_problem``).

The corpus stage skips a malformed line (not UTF-8, not JSON, no text field) and counts it against
``corpus.max_malformed_lines``, so a Latin-1 file or a file of the wrong format fails there only after the
allowance is used up, or passes with its documents silently dropped, and an empty file gives an empty corpus.
Here the first ``SAMPLE_LINES`` records of every file are read by the stage's own reader (``sources``), and
the first malformed one, or a file with no document at all, is an error naming the file and line.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from domainbert.config.corpus import LocalSource, SourceConfig
from domainbert.core.errors import ConfigError, DataError, DomainbertError
from domainbert.corpus.sources import MalformedCounter, _records, detect_format, documents_of, expand_paths

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig

SAMPLE_LINES = 200
# Bounds that make the token count an upper bound: no tokenizer in use packs text into fewer than 2 bytes per
# token (English WordPiece takes about 4.5), and text compresses at most about 10 times (gzip on text: 3-4).
MIN_BYTES_PER_TOKEN = 2
MAX_COMPRESSION = 10
_GZIP = b"\x1f\x8b"
_COMPRESSED = (_GZIP, b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")

_REASONS = {
    "not_utf8": "not UTF-8 text (the corpus is read as UTF-8: convert the file, e.g. `iconv -f latin1 -t utf-8`)",
    "invalid_json": "not valid JSON (a {fmt} source holds one JSON object per line)",
    "not_an_object": "a JSON value that is not an object (a {fmt} source holds one JSON object per line)",
}


class _FirstProblem(MalformedCounter):
    """A counter that allows no malformed line: the first one is the error."""

    def __init__(self, source: LocalSource, fmt: str) -> None:
        super().__init__(limit=0)
        self.source, self.fmt = source, fmt

    def skip(self, source: str, reason: str, file: str | Path, line: int | None) -> None:
        if reason == "missing_text":
            what = (
                f"a field of text_template {self.source.text_template!r} is missing"
                if self.source.text_template
                else f"no string field {self.source.text_field!r} (the source's text_field)"
            )
        else:
            what = _REASONS.get(reason, reason).format(fmt=self.fmt)
        raise DataError(f"source {source!r}: {what}", file=file, line=line)


def check_local_source(source: LocalSource) -> None:
    """Read the first ``SAMPLE_LINES`` records of each of the source's files as the corpus stage reads them.

    Raises:
        DataError: a glob matching nothing, a file with no document, or the first malformed record (its file
            and line).
    """
    for path in expand_paths(source):
        fmt = detect_format(path, source.format)
        first = _FirstProblem(source, fmt)
        records = (((path, line), rec) for line, rec in islice(_records(path, fmt, source.name, first), SAMPLE_LINES))
        if not sum(1 for _ in documents_of(source, records, first, start=0, limit=SAMPLE_LINES)):
            raise DataError(f"source {source.name!r}: empty: the file holds no document", file=path)


def _text_bytes_at_most(path: Path) -> int:
    """The most bytes of text ``path`` can hold: its size, or for a compressed file its size times
    ``MAX_COMPRESSION``. gzip records the size it unpacks to, modulo 4 GiB, in its last four bytes: exact for
    a file too small to unpack past 4 GiB at deflate's largest ratio (1032), a floor for a larger one."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(6)
        if not head.startswith(_COMPRESSED):
            return size
        if head.startswith(_GZIP) and size >= 18:
            f.seek(-4, 2)
            unpacked = int.from_bytes(f.read(4), "little")
            return unpacked if size * 1032 < 1 << 32 else max(unpacked, size * MAX_COMPRESSION)
    return size * MAX_COMPRESSION


def _bytes_and_files(sources: list[SourceConfig]) -> tuple[int, int] | None:
    """The most bytes of text the sources' files can hold, and how many files; None where a size is unknown."""
    total = files = 0
    for source in sources:
        if not isinstance(source, LocalSource):
            return None
        try:
            sizes = [_text_bytes_at_most(path) for path in expand_paths(source)]
        except (DomainbertError, OSError):
            return None  # validate names the missing file
        total, files = total + sum(sizes), files + len(sizes)
    return total, files


def source_tokens_at_most(sources: list[SourceConfig]) -> int | None:
    """The most tokens the sources' files can make, from their sizes alone (nothing is read); None when a
    source's size is unknown here (a Hugging Face dataset) or its files cannot be listed."""
    found = _bytes_and_files(sources)
    return None if found is None else found[0] // MIN_BYTES_PER_TOKEN


def source_words_at_most(sources: list[SourceConfig]) -> int | None:
    """The most whitespace-separated words the sources' files can hold, from their sizes alone: every word but
    a file's last takes a character and a separator. None where ``source_tokens_at_most`` is."""
    found = _bytes_and_files(sources)
    return None if found is None else found[0] // 2 + found[1]


def vocab_size_problem(cfg: DomainConfig, file: str | Path) -> str | None:
    """The vocabulary stage refuses a corpus with fewer than ``vocab.min_words_per_token`` train words per token
    of the domain vocabulary (``vocab.stage``), after the corpus is built: one line naming ``file`` and the field
    when the sources cannot hold that many words whatever the corpus keeps; None when they can, or when a size
    is unknown here (a Hugging Face source, a base model out of reach)."""
    most = source_words_at_most(cfg.corpus.sources)
    if most is None:  # before the base tokenizer is loaded: no download for a corpus of unknown size
        return None
    base = 0 if cfg.tokenizer.vocab_size else _base_vocab_size(cfg.base_model.name_or_path)  # loaded if needed
    if base is None:  # the base tokenizer cannot be loaded here
        return None
    size = cfg.tokenizer.size_given(base)
    per = cfg.vocab.min_words_per_token
    if most >= per * size:
        return None
    return str(
        ConfigError(
            f"the corpus sources hold at most {most:,} words, and a {size:,}-token domain vocabulary needs "
            f"{per * size:,.0f} train words (vocab.min_words_per_token {per:g} per token): set tokenizer.vocab_size "
            f"to {int(most // per):,} or less, or add text",
            file=file,
            field="tokenizer.vocab_size",
        )
    )


def _base_vocab_size(name_or_path: str) -> int | None:
    """The base tokenizer's size (the domain vocabulary's default size), or None when it cannot be loaded here."""
    from domainbert.core.models import load_tokenizer

    try:
        return int(load_tokenizer(name_or_path).backend_tokenizer.get_vocab_size())
    except (DomainbertError, OSError, ValueError):
        return None
