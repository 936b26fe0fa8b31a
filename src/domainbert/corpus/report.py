"""The corpus report: ``report.md``, ``report.html`` and ``length_histogram.png`` from the manifest.

Tables of documents, words, bytes and estimated tokens per split and per source, drops per filter and
reason, duplicates, decontamination per task/split, the leakage audit (counts per task/split, examples, what was
not checked; leaks and gaps in red in the HTML) and skipped input lines; a histogram of document lengths in
words (log-spaced bins). Rendering only: every number comes from the manifest built in ``build``; the
sample of dropped documents per filter is shaped by ``drop_samples``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from domainbert.core.document import Alert, Document, Figure, Section, Table, to_html, to_markdown
from domainbert.core.plotting import new_figure, save_png
from domainbert.corpus import drop_samples


def length_summary(lengths: np.ndarray) -> dict[str, Any]:
    """Min, median, mean, p95 and max document length in words."""
    if len(lengths) == 0:
        return {"min": 0, "median": 0, "mean": 0.0, "p95": 0, "max": 0}
    return {
        "min": int(lengths.min()),
        "median": int(np.median(lengths)),
        "mean": round(float(lengths.mean()), 1),
        "p95": int(np.percentile(lengths, 95)),
        "max": int(lengths.max()),
    }


def _tables(m: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    tables = []
    cols = ["documents", "words", "bytes", "estimated_tokens"]
    tables.append(("Splits", ["split", *cols], [[s, *(v[c] for c in cols)] for s, v in m["splits"].items()]))
    tables.append(
        (
            "Sources",
            ["source", "documents_in", *cols],
            [[s, v["documents_in"], *(v[c] for c in cols)] for s, v in m["sources"].items()],
        )
    )
    rows = [
        [name, f["dropped"], ", ".join(f"{r}: {n}" for r, n in sorted(f["reasons"].items())) or "-"]
        for name, f in m["filters"].items()
    ]
    tables.append(("Filters (in pipeline order)", ["filter", "dropped", "reasons"], rows))
    tables += drop_samples.report_tables(m.get("filter_examples") or {})
    d = m["dedup"]
    tables.append(
        (
            "Deduplication",
            [
                "exact duplicates removed",
                "near-duplicate clusters",
                "near duplicates removed",
                "threshold",
                "LSH bands x rows",
            ],
            [
                [
                    d["exact_removed"],
                    d["near_clusters"],
                    d["near_removed"],
                    d["threshold"],
                    f"{d['lsh_bands']} x {d['lsh_rows']}",
                ]
            ],
        )
    )
    dc = m["decontamination"]
    rows = [
        [owner, dc["index"].get(owner, {}).get("texts", "-"), c["documents"], c["sentences"]]
        for owner, c in sorted(dc["by_task_split"].items())
    ]
    tables.append(("Decontamination", ["task/split", "eval texts", "documents removed", "sentences removed"], rows))
    tables += _audit_tables(m.get("audit"))
    mal = m["malformed_lines"]
    rows = [[src, ", ".join(f"{r}: {n}" for r, n in sorted(v.items()))] for src, v in mal["by_source"].items()]
    tables.append((f"Input lines skipped ({mal['total']} malformed; see the reasons)", ["source", "reasons"], rows))
    return tables


def _audit_tables(audit: dict[str, Any] | None) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The leakage audit per task/split (verbatim counts in red when non-zero), its examples, and what was
    not checked."""
    if not audit:
        return []
    if not audit["enabled"]:
        return [("Leakage audit", ["audit"], [[Alert("switched off (corpus.decontamination.audit: false)")]])]
    rows, examples = [], []
    for owner, c in sorted(audit["by_task_split"].items()):
        rows.append(
            [
                owner,
                c["texts"],
                c["whole_document_texts"],
                Alert(f"{c['verbatim']:,}") if c["verbatim"] else 0,
                c["ngram_texts"],
                c["texts_with_ngram_hits"],
                f"{c['ngrams_found']:,} / {c['ngrams']:,}",
                c["source"],
            ]
        )
        examples += [
            [owner, kind, e["document"], e["text"]]
            for kind, key in (("verbatim", "examples"), (f"{audit['ngram']}-gram", "ngram_examples"))
            for e in c[key]
        ]
    rows += [
        [owner, Alert(f"not checked: {why}"), "-", "-", "-", "-", "-", "-"]
        for owner, why in sorted(audit["not_checked"].items())
    ]
    header = [
        "task/split",
        "eval texts",
        f"under {audit['min_words']} words (whole documents only)",
        "verbatim",
        f"texts of {audit['ngram']}+ words",
        "with an n-gram in the corpus",
        "n-grams found",
        "read from",
    ]
    return [
        (
            f"Leakage audit: {audit['verbatim']:,} of {audit['texts']:,} evaluation texts in the corpus verbatim"
            + (" (allowed by corpus.decontamination.allow_leaks)" if audit["verbatim"] else ""),
            header,
            rows,
        ),
        ("Leakage audit examples", ["task/split", "found", "document", "evaluation text"], examples),
    ]


def _cell(v: object) -> str:
    if isinstance(v, Alert):
        return v
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _summary(m: dict[str, Any]) -> str:
    lw = m["length_words"]
    return (
        f"{m['documents_in']:,} documents read, {m['documents_out']:,} kept "
        f"({m['documents']['train']:,} train, {m['documents']['validation']:,} validation); "
        f"{m['words']['total']:,} words, {m['bytes']['total']:,} bytes. Document length in words: median "
        f"{lw['median']}, mean {lw['mean']}, p95 {lw['p95']}, max {lw['max']}. "
        f"Estimated tokens: {m['estimated_tokens_method']}. Decontamination rule: {m['decontamination']['rule']}."
        + _audit_summary(m.get("audit"))
    )


def _audit_summary(audit: dict[str, Any] | None) -> str:
    if not audit or not audit["enabled"]:
        return " Leakage audit: off." if audit else ""
    gaps = f" Not checked: {', '.join(sorted(audit['not_checked']))}." if audit["not_checked"] else ""
    return (
        f" Leakage audit ({audit['method']}): {audit['verbatim']:,} of {audit['texts']:,} evaluation texts "
        f"verbatim in the corpus, {audit['texts_with_ngram_hits']:,} with a {audit['ngram']}-gram in it.{gaps}"
    )


def plot_lengths(lengths: np.ndarray, path: Path) -> None:
    """Histogram of document lengths in words, log-spaced bins."""
    fig, ax = new_figure(figsize=(7, 4))
    top = max(int(lengths.max()) if len(lengths) else 1, 2)
    bins = np.unique(np.geomspace(1, top + 1, 40).astype(int))
    ax.hist(lengths, bins=bins.tolist(), color="#4477aa")
    ax.set_xscale("log")
    ax.set_xlabel("document length (words)")
    ax.set_ylabel("documents")
    ax.set_title("Document lengths")
    # fixed margins: tight_layout is slow
    save_png(fig, path, dpi=100, margins={"left": 0.12, "right": 0.97, "bottom": 0.14, "top": 0.9})


def write_reports(out_dir: Path, manifest: dict[str, Any], lengths: np.ndarray) -> None:
    """Write ``report.md``, ``report.html`` (``report.document``, the renderer of every stage report) and
    ``length_histogram.png`` into ``out_dir``."""
    plot_lengths(lengths, out_dir / "length_histogram.png")
    summary = Section("Summary").add(_summary(manifest), Figure("length_histogram.png", "Document lengths in words"))
    sections = [summary]
    for name, header, rows in _tables(manifest):
        section = Section(name)
        sections.append(section.add(Table(header, [[_cell(v) for v in row] for row in rows]) if rows else "(none)"))
    doc = Document(
        f"Corpus report: {manifest['domain']} ({manifest['profile']})",
        sections,
        footer=f"Content hash of the shards: {manifest['content_hash']}",
    )
    (out_dir / "report.md").write_text(to_markdown(doc))
    (out_dir / "report.html").write_text(to_html(doc, out_dir))
