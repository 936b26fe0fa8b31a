"""Vocabulary overlap between a domain tokenizer and a reference, treating every token style alike.

SciBERT reported the share of its vocabulary found in BERT's (42%) by comparing the two ``vocab.txt`` files
entry by entry. We compute the same share, and the reverse, over *canonical forms* so that WordPiece,
SentencePiece and byte-level BPE vocabularies compare fairly:

- a token becomes ``(position, surface)``; position ``w`` = word-initial, ``c`` = continuation;
  WordPiece: ``##ing`` -> ``(c, "ing")``, ``run`` -> ``(w, "run")``;
  SentencePiece: ``\u2581run`` -> ``(w, "run")``, ``ing`` -> ``(c, "ing")``;
  byte-level BPE: the byte symbols are decoded to text; ``\u0120run`` -> ``(w, "run")``; a piece without the
  space marker is either (GPT-2 also starts words with it after punctuation or at the start of a text), so it
  matches both ``(w, s)`` and ``(c, s)``; pieces that are not whole UTF-8 characters are left out;
- special tokens (``[PAD]``, ``[unused7]``, ``<s>``, ``<|endoftext|>``, byte-fallback ``<0x0A>``) and a bare
  word marker are left out of both sides and of both denominators;
- a domain token is looked up as the reference would see it: when the reference lower-cases its input
  (BERT uncased), the token's surface goes through the reference's normaliser first, so a cased domain
  vocabulary's ``Bank`` and ``Caf\u00e9`` are found as ``bank`` and ``cafe`` (without this, a cased domain vocab
  looks foreign to an uncased base for its casing alone); against a cased reference nothing is folded, so an
  uncased domain vocabulary misses the reference's capitalised tokens (the report lists each reference).

Between two WordPiece vocabularies this is exactly SciBERT's entry-by-entry comparison minus special tokens.
``surface`` variants ignore the position (``run`` and ``##run`` match). This module does not train anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from domainbert.vocab.bytelevel import decode_bytelevel
from domainbert.vocab.reference_vocabs import SPECIAL_PATTERN, TokenizerInfo

Form = tuple[str, str]


def canonical_forms(token: str, style: str) -> tuple[Form, ...]:
    """The canonical forms of one non-special token (empty when it cannot be compared)."""
    if style == "wordpiece":
        if token.startswith("##") and len(token) > 2:
            return (("c", token[2:]),)
        return (("w", token),)
    if style == "metaspace":
        if token.startswith("\u2581"):
            rest = token[1:]
            return (("w", rest),) if rest else ()
        return (("c", token),)
    text = decode_bytelevel(token)
    if not text:
        return ()
    if text.startswith(" "):
        rest = text[1:]
        return (("w", rest),) if rest.strip() else ()
    return (("w", text), ("c", text))


def comparable(tokens: Iterable[str], style: str, special: set[str]) -> dict[str, tuple[Form, ...]]:
    """Non-special tokens that have canonical forms, with those forms."""
    out = {}
    for t in tokens:
        if t in special or SPECIAL_PATTERN.match(t):
            continue
        forms = canonical_forms(t, style)
        if forms:
            out[t] = forms
    return out


class ReferenceForms:
    """The canonical forms of a reference vocabulary, built once and compared against many domain vocabs."""

    def __init__(self, info: TokenizerInfo) -> None:
        self.info = info
        self.tokens = comparable(info.vocab, info.style, info.special)
        self.forms = {f for fs in self.tokens.values() for f in fs}
        self.surfaces = {s for _, s in self.forms}

    def compare(self, domain: dict[str, tuple[Form, ...]], reverse: bool = True) -> dict:
        """Overlap figures of a domain vocabulary (``comparable(...)`` of its tokens) against this reference.

        Returns:
            ``domain_in_reference`` (share of the domain's comparable tokens found in the reference, SciBERT's
            figure), ``reference_in_domain`` (the reverse; only with ``reverse``), ``surface_domain_in_reference``
            (position ignored), ``shared``, ``domain_tokens`` and ``reference_tokens`` (comparable counts).
        """
        domain = self.fold(domain)
        in_ref = sum(1 for fs in domain.values() if any(f in self.forms for f in fs))
        surf = sum(1 for fs in domain.values() if any(s in self.surfaces for _, s in fs))
        n_dom, n_ref = len(domain), len(self.tokens)
        out = {
            "domain_in_reference": in_ref / n_dom if n_dom else 0.0,
            "surface_domain_in_reference": surf / n_dom if n_dom else 0.0,
            "shared": in_ref,
            "domain_tokens": n_dom,
            "reference_tokens": n_ref,
        }
        if reverse:
            dom_forms = {f for fs in domain.values() for f in fs}
            rev = sum(1 for fs in self.tokens.values() if any(f in dom_forms for f in fs))
            out["reference_in_domain"] = rev / n_ref if n_ref else 0.0
        return out

    def missing(self, domain: dict[str, tuple[Form, ...]]) -> list[str]:
        """The domain tokens whose forms are all absent from the reference."""
        return [t for t, fs in self.fold(domain).items() if not any(f in self.forms for f in fs)]

    def fold(self, domain: dict[str, tuple[Form, ...]]) -> dict[str, tuple[Form, ...]]:
        """Domain forms as this reference sees them (through its normaliser when it lower-cases)."""
        norm = self.info.tokenizer.normalizer
        if not self.info.lowercase or norm is None:
            return domain
        cache: dict[str, str] = {}

        def f(surface: str) -> str:
            if surface.isascii():
                return surface.lower()
            if surface not in cache:
                cache[surface] = norm.normalize_str(surface).strip() or surface
            return cache[surface]

        return {t: tuple((pos, f(s)) for pos, s in fs) for t, fs in domain.items()}


def info_forms(info: TokenizerInfo) -> dict[str, tuple[Form, ...]]:
    """``comparable`` over a ``TokenizerInfo``'s whole vocabulary."""
    return comparable(info.vocab, info.style, info.special)
