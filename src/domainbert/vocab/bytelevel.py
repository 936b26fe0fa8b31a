"""GPT-2's byte-level token symbols back to text (for comparing byte-level BPE vocabularies with WordPiece ones).

Its own module so that ``references`` (loading vocabularies) and ``overlap`` (comparing them) both use it
without importing each other. Nothing else here.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    # GPT-2's bytes_to_unicode table, inverted.
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def decode_bytelevel(token: str) -> str | None:
    """GPT-2 byte symbols -> text; None when they are not whole UTF-8 characters."""
    table = _byte_decoder()
    try:
        return bytes(table[c] for c in token).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None
