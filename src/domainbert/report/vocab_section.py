"""The vocabulary section: the vocab stage's recommendation with its reasons, its overlap, fertility and UNK
figures, SciBERT's published overlap beside ours, and the vocab stage's own plots.

The one typed number in the report lives here: SciBERT's 42% token overlap between its SciVocab and BERT's
BaseVocab (Beltagy et al., 2019), shown as a cited point of reference next to this run's measured overlap,
never as a result of this run. Everything else is read from ``vocab/report.json`` as the vocab stage
wrote it; the stage's PNG plots are copied into the report folder (the report is self-contained).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from domainbert.report.document import Figure, Section, Table
from domainbert.report.inputs import RunArtifacts
from domainbert.report.sections import flat_pairs, fmt, not_run, stat_table

SCIBERT_OVERLAP = 0.42
SCIBERT_CITATION = ("Beltagy, Lo and Cohan (2019), SciBERT: A Pretrained Language Model for Scientific Text, "
                    "EMNLP-IJCNLP, Section 2 (Vocabulary): the token overlap between BaseVocab and SciVocab "
                    "(both about 30K WordPiece tokens) is 42%")


def _recommendation(vocab: dict[str, Any]) -> tuple[str | None, list[str]]:
    rec = vocab.get("recommendation")
    if isinstance(rec, dict):
        choice = rec.get("choice") or rec.get("recommendation") or rec.get("action")
        reasons = rec.get("reasons") or []
        return (str(choice) if choice else None), [str(r) for r in reasons]
    if isinstance(rec, str):
        return rec, [str(r) for r in vocab.get("reasons") or []]
    return None, []


def _overlap_rows(vocab: dict[str, Any]) -> list[tuple[str, float]]:
    """(reference, overlap fraction) pairs as recorded by the vocab stage."""
    overlap = vocab.get("overlap")
    out = []
    if isinstance(overlap, dict):
        for ref, value in overlap.items():
            if isinstance(value, dict):
                value = value.get("overlap", value.get("fraction"))
            if isinstance(value, (int, float)):
                out.append((ref, float(value)))
    return out


def vocab_section(arts: RunArtifacts, vocab_dir: Path, out_dir: Path) -> Section:
    """The vocabulary section (or "Not run" when ``vocab/report.json`` is absent)."""
    title = "Vocabulary"
    v = arts.vocab
    if v is None:
        return not_run(title, vocab_dir / "report.json", arts.root, "vocab")
    sec = Section(title)
    choice, reasons = _recommendation(v)
    if choice:
        sec.add(f"Recommendation of the vocab stage: {choice}.")
        if reasons:
            sec.add(reasons)
    overlaps = _overlap_rows(v)
    if overlaps:
        rows = [[ref, f"{100 * value:.1f}%", "this run"] for ref, value in overlaps]
        rows.append(["SciBERT SciVocab vs BERT BaseVocab", f"{100 * SCIBERT_OVERLAP:.0f}%",
                     "published (SciBERT paper), for reference"])
        sec.add(Table(["vocabulary pair", "token overlap", "source"], rows,
                      "Overlap of the domain vocabulary with each reference vocabulary"))
        sec.add(f"Reference figure: {SCIBERT_CITATION}.")
    shown = {"recommendation", "reasons", "overlap"}
    for key, value in v.items():
        if key in shown:
            continue
        if isinstance(value, dict) and (table := stat_table(value, key.replace("_", " "), key.replace("_", " "))):
            sec.add(table)
        elif isinstance(value, dict) and value:
            sec.add(Table(["figure", "value"], flat_pairs(value), key.replace("_", " ")))
    scalars = [[k.replace("_", " "), fmt(val, 3)] for k, val in v.items()
               if k not in shown and not isinstance(val, (dict, list))]
    if scalars:
        sec.add(Table(["figure", "value"], scalars, "Other vocabulary figures"))
    for plot in arts.vocab_plots:
        name = f"vocab_{plot.name}"
        shutil.copyfile(plot, out_dir / name)
        sec.add(Figure(name, f"From the vocab stage: {plot.stem.replace('_', ' ')}"))
    return sec
