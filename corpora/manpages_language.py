"""The languages the man-page positive controls are built in: one row per language of Debian's manpages-l10n.

    from manpages_language import LANGUAGES
    LANGUAGES["fr"].package  # "manpages-fr"

``build_manpages.py`` (the corpus and the section task) and ``build_manpages_order.py`` (the word-order task)
read everything that differs between languages from here: the Debian package and its checksum, the heading of
the translators' credits, the headings left out of the task's text, the language langid.py tells from English,
and where the outputs go. French keeps the file names it shipped with; a new language gets its own files and
its own English corpus (its held-out pages differ from French's).

What it leaves out: rendering, splitting and writing (the builders), and any language manpages-l10n has no
package for. German is kept back as a hold-out (studies/00-positive-control.md) and has no row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import langid.langid

ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Language:
    """One language of manpages-l10n: its package, its headings and its outputs."""

    code: str  # langid.py's code, the package's man folder (usr/share/man/<code>) and its po folder
    package: str
    version: str
    sha256: str  # of ``<package>_<version>_all.deb``
    credits: str  # the heading of the translators' credits, on every translated page (kept as meta.notice)
    not_task: frozenset[str]  # headings of command lines, related pages and notices shared by many pages
    english_corpus: str  # file name under manpages/: English pages of the same size, none of a held-out page

    @property
    def section_dir(self) -> Path:
        return ROOT / "tasks" / f"manpages-{self.code}-section"

    @property
    def order_dir(self) -> Path:
        return ROOT / "tasks" / f"manpages-{self.code}-order"

    @property
    def corpus_file(self) -> str:
        return f"{self.code}-corpus.jsonl.gz"

    def identifier(self) -> langid.langid.LanguageIdentifier:
        """langid.py between this language and English alone (loaded once per language: loading takes a second)."""
        return _identifier(self.code)


@cache
def _identifier(code: str) -> langid.langid.LanguageIdentifier:
    ident = langid.langid.LanguageIdentifier.from_modelstring(langid.langid.model, norm_probs=True)
    ident.set_languages([code, "en"])
    return ident


LANGUAGES = {
    "fr": Language(
        code="fr",
        package="manpages-fr",
        version="4.18.1-1",
        sha256="ec29759cc0e4a44dc7719c1e32869d0060667049e584f09556f0d982b969ea33",
        credits="TRADUCTION",
        not_task=frozenset(
            {
                "SYNOPSIS",
                "VOIR AUSSI",
                "COPYRIGHT",
                "AUTEUR",
                "AUTEURS",
                "SIGNALER DES BOGUES",
                "SIGNALEMENTS DE BOGUES",
                "DISPONIBILITÉ",
            }
        ),
        english_corpus="en-corpus.jsonl.gz",
    ),
    "es": Language(
        code="es",
        package="manpages-es",
        version="4.18.1-1",
        sha256="d21e9f85e487f149ae45b5c525b2b1a70ae7fd38d4b05b47c8753042c66f4c2b",
        credits="TRADUCCIÓN",
        not_task=frozenset(
            {
                "SINOPSIS",
                "VÉASE TAMBIÉN",
                "COPYRIGHT",
                "AUTOR",
                "AUTORES",
                "INFORMAR DE ERRORES",
                "DISPONIBILIDAD",
            }
        ),
        english_corpus="en-corpus-es.jsonl.gz",
    ),
}
