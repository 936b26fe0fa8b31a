"""The sections of a domain's comparison report, each built from one stage's artifacts.

A stage whose artifacts are absent gets a section that says "Not run" and names the file it looked for;
nothing is estimated in its place. Numbers are formatted here (thousands separators, points for scores);
which comparisons exist and their verdicts come from ``results.py``, the sentences from ``summary.py``, the
vocabulary section from ``vocab_section.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from domainbert.core.document import Figure, Section, Table
from domainbert.report.inputs import RunArtifacts


def fmt(value: Any, digits: int = 2) -> str:
    """A cell: integers with thousands separators, floats with ``digits`` significant decimals, '-' for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 10**-digits):
            return f"{value:.{digits}e}"
        return f"{value:,.{digits}f}"
    return str(value)


def not_run(title: str, path: Path, root: Path, stage: str) -> Section:
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    return Section(title).add(f"Not run: {rel} was not found. Run `domainbert {stage}` and re-render the report.")


# Artifacts are saved with sorted keys; tables read better with counts in pipeline order.
PREFERRED_ORDER = [
    "documents_in",
    "documents",
    "words",
    "bytes",
    "estimated_tokens",
    "exact_removed",
    "near_removed",
    "near_clusters",
]


def ordered(keys: list[str]) -> list[str]:
    """``keys`` with the PREFERRED_ORDER ones first (in that order), the rest as given."""
    known = [k for k in PREFERRED_ORDER if k in keys]
    return known + [k for k in keys if k not in known]


def stat_table(mapping: dict[str, Any], first: str, caption: str | None = None) -> Table | None:
    """Rows from ``{name: {stat: number}}``; columns are the union of scalar stats in first-seen order."""
    rows = {k: v for k, v in mapping.items() if isinstance(v, dict)}
    if not rows:
        return None
    cols: list[str] = []
    for stats in rows.values():
        cols += [k for k, v in stats.items() if not isinstance(v, (dict, list)) and k not in cols]
    cols = ordered(cols)
    return Table(
        [first, *(c.replace("_", " ") for c in cols)],
        [[name, *(fmt(stats.get(c)) for c in cols)] for name, stats in rows.items()],
        caption,
    )


def flat_pairs(mapping: dict[str, Any], prefix: str = "") -> list[list[str]]:
    """Nested scalars as ``[dotted key, value]`` rows (for small blocks such as decontamination counts)."""
    out = []
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += flat_pairs(value, name + ".")
        elif isinstance(value, list):
            out.append([name, ", ".join(fmt(v) for v in value[:20]) + (" ..." if len(value) > 20 else "")])
        else:
            out.append([name, fmt(value)])
    return out


def corpus_section(arts: RunArtifacts, corpus_dir: Path, out_dir: Path, filter_order: list[str]) -> Section:
    """Corpus size per split and source, filter drops (in ``filter_order``, the config's), deduplication and
    decontamination counts, and the corpus stage's plots."""
    title = "Corpus"
    m = arts.manifest
    if m is None:
        return not_run(title, corpus_dir / "manifest.json", arts.root, "corpus")
    sec = Section(title)
    for key, first, caption in (
        ("splits", "split", "Documents, words, bytes and estimated tokens per split"),
        ("sources", "source", "Per source"),
    ):
        if isinstance(m.get(key), dict) and (table := stat_table(m[key], first, caption)):
            sec.add(table)
    filters = m.get("filters") or {}
    if filters:
        rows = []
        names = [f for f in filter_order if f in filters] + [f for f in filters if f not in filter_order]
        for name in names:
            info = filters[name]
            reasons = (info.get("reasons") or {}) if isinstance(info, dict) else {}
            top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3] if isinstance(reasons, dict) else []
            rows.append(
                [
                    name,
                    fmt(info.get("dropped") if isinstance(info, dict) else info),
                    ", ".join(f"{r} ({fmt(n)})" for r, n in top) or "-",
                ]
            )
        sec.add(Table(["filter", "dropped", "top reasons"], rows, "Documents dropped by each filter, in order"))
    dedup = m.get("dedup")
    if isinstance(dedup, dict) and dedup:
        dedup = {k: dedup[k] for k in ordered(list(dedup))}
        sec.add(Table(["deduplication", "value"], flat_pairs(dedup), "Exact and near-duplicate removal"))
    sec.add(*decontamination_blocks(m.get("decontamination")))
    sec.add(*audit_blocks(m.get("audit")))
    for plot in arts.corpus_plots:
        name = f"corpus_{plot.name}"
        shutil.copyfile(plot, out_dir / name)
        sec.add(Figure(name, f"From the corpus stage: {plot.stem.replace('_', ' ')}"))
    return sec


def decontamination_blocks(decon: Any) -> list[str | Table]:
    """What decontamination removed, per evaluation task and split (``by_task_split``) when recorded."""
    if not isinstance(decon, dict) or not decon:
        return ["Decontamination: the manifest records none."]
    if decon.get("enabled") is False:
        return ["Decontamination: disabled in the domain config."]
    blocks: list[str | Table] = [
        f"Decontamination against the evaluation sets: {fmt(decon.get('documents_removed'))} documents removed "
        f"and {fmt(decon.get('sentences_removed'))} sentences cut."
        + (f" Rule: {decon['rule']}." if decon.get("rule") else "")
    ]
    by_owner = decon.get("by_task_split")
    index = decon.get("index")
    if not isinstance(index, dict):
        index = {}
    if isinstance(by_owner, dict):
        owners = list(dict.fromkeys([*index, *by_owner]))
        rows = [
            [
                o,
                fmt((index.get(o) or {}).get("texts")),
                fmt((by_owner.get(o) or {}).get("documents", 0)),
                fmt((by_owner.get(o) or {}).get("sentences", 0)),
            ]
            for o in owners
        ]
        blocks.append(
            Table(
                ["evaluation set", "texts indexed", "documents removed", "sentences cut"],
                rows,
                "Decontamination per evaluation task and split",
            )
        )
    else:
        blocks.append(Table(["decontamination", "value"], flat_pairs(decon), "Decontamination counts"))
    return blocks


def audit_blocks(audit: Any) -> list[str | Table]:
    """The corpus stage's leakage audit (``corpus/audit.py``): evaluation texts still in the corpus, per split."""
    if not isinstance(audit, dict) or not audit.get("enabled", True):
        return ["Leakage audit: not run (no audit in the manifest, or disabled)."]
    rows = [
        [name, fmt(a.get("texts")), fmt(a.get("verbatim")), fmt(a.get("texts_with_ngram_hits"))]
        for name, a in (audit.get("by_task_split") or {}).items()
        if isinstance(a, dict)
    ]
    verbatim = sum(
        int(a.get("verbatim") or 0) for a in (audit.get("by_task_split") or {}).values() if isinstance(a, dict)
    )
    text = f"Leakage audit of the finished corpus: {verbatim} evaluation text(s) found verbatim" + (
        " (allowed by the domain config)." if verbatim and audit.get("allow_leaks") else "."
    )
    unchecked = audit.get("not_checked") or []
    if unchecked:
        items = unchecked.items() if isinstance(unchecked, dict) else [(u, "") for u in unchecked]
        text += " Not checked: " + ", ".join(f"{k} ({v})" if v else str(k) for k, v in items) + "."
    return [
        text,
        Table(
            ["evaluation set", "texts", "verbatim in corpus", "texts with an n-gram in corpus"],
            rows,
            "Independent check of every evaluation text against the final corpus",
        ),
    ]
