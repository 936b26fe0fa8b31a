"""The vocabulary section: the vocab stage's recommendation with its reasons, how much of the domain
vocabulary each reference (and the base model) already holds, published overlaps beside ours, held-out
fertility and UNK rates, the most fragmented words, the extension, and the vocab stage's own plots.

Everything is read from ``vocab/report.json`` as ``domainbert.vocab.stage`` writes it (``recommendation``,
``overlap``, ``published``, ``heldout``, ``fragmented_words``, ``extension``). Published figures such as
SciBERT's 42% overlap come from the domain YAML (``vocab.published``) through that report; this module types
no number of its own. The stage's PNG plots are copied into the report folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domainbert.core.document import Figure, Section, Table
from domainbert.report.inputs import Record, RunArtifacts
from domainbert.report.sections import fmt, not_run
from domainbert.vocab.report import extension_sentence

FRAGMENTED_ROWS = 10


def pct(value: Any, digits: int = 1) -> str:
    return f"{100 * float(value):.{digits}f}%" if isinstance(value, (int, float)) else "-"


@dataclass(frozen=True)
class VocabFindings:
    """The parts of ``vocab/report.json`` the pages read, each shape checked once where the file's object is
    read (``of``): what is not of its shape reads as absent, as the stage had not recorded it."""

    recommendation: Mapping[str, Any] | None
    overlap: tuple[tuple[str, Mapping[str, Any]], ...]  # (reference, {"domain", "control", "domain_matched"})
    published: tuple[Any, ...]
    heldout: Mapping[str, Any]
    languages: Mapping[str, Any] | None  # a multilingual corpus's, with its per-language held-out figures
    fragmented: tuple[Mapping[str, Any], ...]  # the base tokenizer's most fragmented words
    extension: Mapping[str, Any] | None

    @classmethod
    def of(cls, vocab: Record) -> VocabFindings:
        rec, overlap, heldout = vocab.get("recommendation"), vocab.get("overlap"), vocab.get("heldout")
        languages, ext = vocab.get("languages"), vocab.get("extension")
        return cls(
            recommendation=rec if isinstance(rec, dict) else None,
            overlap=tuple((k, v) for k, v in overlap.items() if isinstance(v, dict))
            if isinstance(overlap, dict)
            else (),
            published=tuple(vocab.get("published") or []),
            heldout=heldout if isinstance(heldout, dict) else {},
            languages=languages if isinstance(languages, dict) and languages.get("heldout") else None,
            fragmented=tuple((vocab.get("fragmented_words") or {}).get("base") or []),
            extension=ext if isinstance(ext, dict) and ext else None,
        )


def recommendation(vocab: VocabFindings) -> tuple[str | None, str | None, list[str]]:
    """(decision, one-line why, reasons) of the vocab report."""
    rec = vocab.recommendation
    if rec is None:
        return None, None, []
    decision = rec.get("decision")
    if decision == "extend" and rec.get("extend_tokens"):
        decision = f"extend (by {rec['extend_tokens']:,} tokens)"
    return decision, rec.get("summary"), [str(r) for r in rec.get("reasons") or []]


def domain_overlap(vocab: VocabFindings) -> tuple[str, float] | None:
    """The first reference's share of the domain vocabulary found in it (for the cross-domain page)."""
    for ref, row in vocab.overlap:
        value = (row.get("domain") or {}).get("domain_in_reference")
        if isinstance(value, (int, float)):
            return ref, float(value)
    return None


def _count(value: Any) -> str:
    return f"{float(value):,.0f}" if isinstance(value, (int, float)) else "-"


def published_blocks(published: list[Any]) -> list[str | Table]:
    """Published overlaps (``vocab.published`` in the YAML, e.g. SciBERT's 42%) beside this run's, with the
    vocab stage's sentence on why they differ."""
    rows = [p for p in published if isinstance(p, dict)]
    if not rows:
        return []
    table = Table(
        [
            "published vocabulary",
            "reference",
            "published overlap",
            "published vocab size",
            "published corpus words",
            "this run's overlap",
            "this run's vocab size",
            "this run's corpus words",
            "general-text control",
            "source",
        ],
        [
            [
                str(p.get("name")),
                str(p.get("reference")),
                pct(p.get("published_overlap")),
                fmt(p.get("published_vocab_size")),
                _count(p.get("published_corpus_words")),
                pct(p.get("ours")),
                fmt(p.get("vocab_size")),
                fmt(p.get("corpus_words")),
                pct(p.get("control")),
                str(p.get("source") or "-"),
            ]
            for p in rows
        ],
        "Published overlap figures (as their authors reported them) beside this run's",
    )
    return [table, *[str(p["sentence"]) for p in rows if p.get("sentence")]]


def vocab_section(arts: RunArtifacts, vocab_dir: Path, out_dir: Path) -> Section:
    """The vocabulary section (or "Not run" when ``vocab/report.json`` is absent)."""
    title = "Vocabulary"
    if arts.vocab is None:
        return not_run(title, vocab_dir / "report.json", arts.root, "vocab")
    v = VocabFindings.of(arts.vocab)
    sec = Section(title)
    decision, why, reasons = recommendation(v)
    if decision:
        sec.add(f"Recommendation: {decision}" + (f" - {why}." if why else "."), "Reasons:", reasons)
    _overlap_table(sec, v)
    sec.add(*published_blocks(list(v.published)))
    _heldout_table(sec, v)
    _language_table(sec, v)
    _fragmented_table(sec, v)
    _extension_text(sec, v)
    for plot in arts.vocab_plots:
        name = f"vocab_{plot.name}"
        shutil.copyfile(plot, out_dir / name)
        sec.add(Figure(name, f"From the vocab stage: {plot.stem.replace('_', ' ')}"))
    return sec


def _overlap_table(sec: Section, v: VocabFindings) -> None:
    rows = []
    for ref, row in v.overlap:
        dom, ctl, matched = row.get("domain") or {}, row.get("control") or {}, row.get("domain_matched") or {}
        rows.append(
            [
                ref,
                pct(dom.get("domain_in_reference")),
                pct(matched.get("domain_in_reference")),
                pct(ctl.get("domain_in_reference")),
                pct(dom.get("reference_in_domain")),
                fmt(dom.get("shared")),
                fmt(dom.get("domain_tokens")),
            ]
        )
    if rows:
        sec.add(
            Table(
                [
                    "reference",
                    "domain vocab in reference",
                    "size-matched domain vocab in reference",
                    "general-text control vocab in reference",
                    "reference in domain vocab",
                    "shared tokens",
                    "domain tokens compared",
                ],
                rows,
                "Vocabulary overlap (special tokens left out; the control vocabulary is trained on an equal "
                "amount of general text, so control minus domain is the domain shift)",
            )
        )


def _heldout_table(sec: Section, v: VocabFindings) -> None:
    heldout = v.heldout
    if heldout:
        sec.add(
            Table(
                [
                    "tokenizer",
                    "fertility (tokens/word)",
                    "words split in 3+",
                    "UNK rate",
                    "tokens per document",
                    "length vs base",
                ],
                [
                    [
                        name,
                        fmt(h.get("fertility"), 3),
                        pct(h.get("split_3plus")),
                        pct(h.get("unk_rate"), 2),
                        fmt(h.get("mean_tokens_per_document"), 1),
                        fmt(h.get("length_vs_base"), 3),
                    ]
                    for name, h in heldout.items()
                    if isinstance(h, dict)
                ],
                "Held-out validation documents tokenized by each tokenizer",
            )
        )


def _language_table(sec: Section, v: VocabFindings) -> None:
    """Per language (a multilingual corpus's ``meta.lang``): documents, and each tokenizer's fertility and UNK
    rate on that language's held-out text."""
    languages = v.languages
    if languages is None:
        return
    names = list(next(iter(languages["heldout"].values())))
    rows = [
        [
            lang,
            fmt(languages["train_documents"].get(lang)),
            fmt(languages["heldout_documents"].get(lang)),
            *(f"{fmt(stats[name].get('fertility'), 2)} / {pct(stats[name].get('unk_rate'), 1)}" for name in names),
        ]
        for lang, stats in languages["heldout"].items()
    ]
    sec.add(
        Table(
            ["language", "train documents", "held-out documents", *names],
            rows,
            "Per language: each tokenizer's fertility (tokens/word) / UNK rate on that language's held-out "
            "documents (languages as the source recorded them)",
        )
    )


def _fragmented_table(sec: Section, v: VocabFindings) -> None:
    fragmented = v.fragmented
    if fragmented:
        sec.add(
            Table(
                ["word", "count", "base model pieces"],
                [
                    [str(r.get("word")), fmt(r.get("count")), " ".join(map(str, r.get("pieces") or []))]
                    for r in fragmented[:FRAGMENTED_ROWS]
                ],
                "Most frequent domain words the base tokenizer cuts into 3+ pieces",
            )
        )


def _extension_text(sec: Section, v: VocabFindings) -> None:
    ext = v.extension
    if ext is not None:
        if ext.get("enabled") and "method" in ext:
            top = ", ".join(
                str(t.get("token", t.get("word", t))) if isinstance(t, dict) else str(t)
                for t in (ext.get("top") or [])[:15]
            )
            why = extension_sentence(dict(ext), dict(v.recommendation or {})) if "source" in ext else ""
            sec.add(
                f"Vocabulary extension: {fmt(ext.get('num_tokens'))} tokens added to the base model "
                f"({fmt(ext.get('candidates'))} candidates; method {ext.get('method', '-')}; new vocabulary "
                f"size {fmt(ext.get('vocab_size'))})"
                + (f"; first tokens: {top}." if top else ".")
                + (f" {why}" if why else "")
            )
        else:
            sec.add(
                f"Vocabulary extension: not built (enabled: {fmt(ext.get('enabled'))}, "
                f"candidates: {fmt(ext.get('candidates'))})."
            )
