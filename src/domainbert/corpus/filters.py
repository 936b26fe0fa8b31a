"""Cleaning and filtering components, by versioned name (dolma-style), composed from the domain YAML.

A component is either a *transform* (text -> text) or a *filter* (text -> ``(keep, reason)``, datatrove-style).
Each is registered under a name carrying a version (``min_length_v1``); the behaviour behind a name never
changes, a new behaviour gets a new version. Options are validated by the component's pydantic model, so an
unknown or mistyped option is a ``ConfigError`` naming the field. ``build_pipeline`` turns the YAML list into
a ``Pipeline`` that counts what each component dropped and why. Language identification lives in
``langid_filter`` and Gopher repetition in ``repetition``; the base class and the registry in ``components``.
No component knows about domains.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, cast

from pydantic import Field

from domainbert.config.corpus import FilterSpec
from domainbert.config.schema import StrictModel
from domainbert.corpus.components import (  # noqa: F401 - the registry's API, re-exported for callers
    Component,
    NoOptions,
    available,
    create,
    register,
)


class Pipeline:
    """The YAML's components in order; ``apply_batch`` cleans a batch of documents and counts drops."""

    def __init__(self, components: list[Component[StrictModel]]) -> None:
        self.components = components
        self.dropped: dict[str, dict[str, int]] = {c.name: {} for c in components}

    def apply_batch(self, texts: list[str]) -> tuple[list[str | None], list[str | None]]:
        """Run every component on every text; per document ``(text, None)`` or ``(None, "name:reason")``.

        Each filter sees all survivors at once, but a document still meets the components in YAML order and
        stops at the first that drops it, so results and counts equal those of one-at-a-time processing
        (``tests/reference/pipeline.py``).
        """
        out: list[str | None] = list(texts)
        reasons: list[str | None] = [None] * len(texts)
        alive = list(range(len(texts)))
        for comp in self.components:
            if not alive:
                break
            survivors = []
            if comp.kind == "transform":
                for i in alive:
                    text = comp.transform(cast(str, out[i]))  # alive: not dropped, so still a text
                    if text:
                        out[i] = text
                        survivors.append(i)
                    else:
                        out[i], reasons[i] = self._drop(comp.name, "empty_after_transform")
            else:
                for i, (keep, reason) in zip(
                    alive, comp.filter_batch([cast(str, out[i]) for i in alive]), strict=True
                ):
                    if keep:
                        survivors.append(i)
                    else:
                        out[i], reasons[i] = self._drop(comp.name, reason)
            alive = survivors
        return out, reasons

    def _drop(self, name: str, reason: str) -> tuple[None, str]:
        counts = self.dropped[name]
        counts[reason] = counts.get(reason, 0) + 1
        return None, f"{name}:{reason}"


def build_pipeline(specs: list[FilterSpec]) -> Pipeline:
    """The components named in ``corpus.filters``, validated and instantiated in order."""
    return Pipeline([create(spec, f"corpus.filters[{i}]") for i, spec in enumerate(specs)])


# --- transforms -------------------------------------------------------------------------------------------


class UnicodeOptions(StrictModel):
    form: Literal["NFC", "NFKC", "NFD", "NFKD"] = "NFC"


@register
class UnicodeNormalize(Component[UnicodeOptions]):
    """Unicode normalisation to the chosen form."""

    name, kind, Options = "unicode_normalize_v1", "transform", UnicodeOptions

    def transform(self, text: str) -> str:
        return unicodedata.normalize(self.options.form, text)


# Control characters (Cc) other than tab and newline, plus invisible format characters that only add noise
# (zero-width space, BOM, soft hyphen); joiners used by emoji sequences (U+200C/U+200D) are kept.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff\u00ad\u2060]")


@register
class StripControlChars(Component[NoOptions]):
    """Remove control characters except tab and newline; carriage returns become newlines."""

    name, kind = "strip_control_chars_v1", "transform"

    def transform(self, text: str) -> str:
        return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


class WhitespaceOptions(StrictModel):
    keep_newlines: bool = Field(True, description="Keep line breaks (at most one blank line in a row).")


_SPACES = re.compile(r"[^\S\n]+")
_BLANKS = re.compile(r"\n\s*\n\s*")


@register
class NormalizeWhitespace(Component[WhitespaceOptions]):
    """Collapse runs of spaces and tabs, trim lines, at most one blank line between paragraphs."""

    name, kind, Options = "normalize_whitespace_v1", "transform", WhitespaceOptions

    def transform(self, text: str) -> str:
        if not self.options.keep_newlines or "\n" not in text:
            # without line breaks the regexes below come to the same as str.split (both use str.isspace)
            return " ".join(text.split())
        text = _SPACES.sub(" ", text)
        text = "\n".join(line.strip() for line in text.split("\n"))
        return _BLANKS.sub("\n\n", text).strip()


class TweetOptions(StrictModel):
    user_token: str = "@user"
    url_token: str = "http"


_MENTION = re.compile(r"(?<![\w@])@\w{1,30}")
_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)


@register
class TweetNormalize(Component[TweetOptions]):
    """XLM-T / BERTweet-style: user mentions become ``@user`` and URLs ``http``."""

    name, kind, Options = "tweet_normalize_v1", "transform", TweetOptions

    def transform(self, text: str) -> str:
        return _URL.sub(self.options.url_token, _MENTION.sub(self.options.user_token, text))


_BOILERPLATE_DEFAULT = [
    r"copyright\b",
    r"\(c\)",
    r"all rights reserved",
    r"spdx-license-identifier",
    r"licensed under",
    r"^\s*(#|//|/\*|\*|--)",
]


class BoilerplateOptions(StrictModel):
    patterns: list[str] = Field(
        default_factory=lambda: list(_BOILERPLATE_DEFAULT),
        description="Case-insensitive regexes; a leading line matching one is removed.",
    )
    max_lines: int = Field(30, ge=1, description="Look at most this many leading lines.")


@register
class StripBoilerplate(Component[BoilerplateOptions]):
    """Remove a licence/copyright header: leading lines (blank or matching a pattern), up to ``max_lines``."""

    name, kind, Options = "strip_boilerplate_v1", "transform", BoilerplateOptions

    def __init__(self, options: BoilerplateOptions) -> None:
        super().__init__(options)
        self._pattern = re.compile("|".join(f"(?:{p})" for p in options.patterns), re.IGNORECASE)

    def transform(self, text: str) -> str:
        lines = text.split("\n")
        cut = 0
        while cut < min(len(lines), self.options.max_lines) and (
            not lines[cut].strip() or self._pattern.search(lines[cut])
        ):
            cut += 1
        return "\n".join(lines[cut:]).strip()


# --- filters ----------------------------------------------------------------------------------------------


class MinLengthOptions(StrictModel):
    min_words: int = Field(0, ge=0)
    min_chars: int = Field(0, ge=0)


@register
class MinLength(Component[MinLengthOptions]):
    """Drop documents shorter than ``min_words`` whitespace words or ``min_chars`` characters."""

    name, kind, Options = "min_length_v1", "filter", MinLengthOptions

    def filter(self, text: str) -> tuple[bool, str]:
        if len(text) < self.options.min_chars:
            return False, "too_few_chars"
        if self.options.min_words and len(text.split()) < self.options.min_words:
            return False, "too_few_words"
        return True, ""


class MaxLengthOptions(StrictModel):
    max_words: int | None = Field(None, ge=1)
    max_chars: int | None = Field(None, ge=1)


@register
class MaxLength(Component[MaxLengthOptions]):
    """Drop documents longer than ``max_words`` words or ``max_chars`` characters."""

    name, kind, Options = "max_length_v1", "filter", MaxLengthOptions

    def filter(self, text: str) -> tuple[bool, str]:
        if self.options.max_chars is not None and len(text) > self.options.max_chars:
            return False, "too_many_chars"
        if self.options.max_words is not None and len(text.split()) > self.options.max_words:
            return False, "too_many_words"
        return True, ""


class SymbolRatioOptions(StrictModel):
    max_ratio: float = Field(0.1, gt=0)
    symbols: list[str] = Field(
        default_factory=lambda: ["#", "...", "\u2026"], description="Gopher counts hash signs and ellipses."
    )


@register
class SymbolRatio(Component[SymbolRatioOptions]):
    """Gopher symbol-to-word ratio: occurrences of ``symbols`` divided by the word count."""

    name, kind, Options = "symbol_ratio_v1", "filter", SymbolRatioOptions

    def filter(self, text: str) -> tuple[bool, str]:
        words = len(text.split())
        count = sum(text.count(s) for s in self.options.symbols)
        if count > self.options.max_ratio * max(words, 1):
            return False, "symbol_ratio"
        return True, ""
