"""Opening input files: plain or compressed (gzip, bz2, xz, zstd), told apart by their magic bytes.

The one place that knows compression; the JSONL reader and the corpus sources open files through it. It
parses nothing.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from pathlib import Path

COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zstd")


_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


def open_binary(path: Path) -> gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile | io.BufferedReader:
    """Open a file for reading bytes, decompressing gzip, bz2, xz or zstd as its magic bytes say."""
    with open(path, "rb") as f:
        head = f.read(6)
    kind = next((k for magic, k in _MAGIC.items() if head.startswith(magic)), None)
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "bz2":
        return bz2.open(path, "rb")
    if kind == "xz":
        return lzma.open(path, "rb")
    if kind == "zstd":
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")
