"""Rendering the vocab report: report.json, report.md, report.html (self-contained) and PNG plots.

The Markdown and HTML are rendered from the same list of blocks (headings, paragraphs, bullet lists,
tables, figures), so they always say the same thing. Plots: ``overlap_curve.png`` (share of the domain and
control vocabularies found in each reference, against vocabulary size) and ``fertility.png`` (sub-tokens per
held-out word and words cut into 3+ pieces, per tokenizer). This module computes no figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from domainbert.core.artifact_types import VocabReport, validate_artifact
from domainbert.core.document import Block, Code, Document, Figure, Section, Table, to_html, to_markdown
from domainbert.core.plotting import new_figure, save_png
from domainbert.vocab.overlap import __doc__ as OVERLAP_METHOD
from domainbert.vocab.recommend import __doc__ as RECOMMEND_METHOD

if TYPE_CHECKING:
    from domainbert.config.vocab import PublishedOverlap


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _and(sizes: list[int]) -> str:
    items = [f"{s:,}" for s in sizes]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _reached(achieved: int, requested: int, what: str) -> str:
    """ "N tokens", saying so when ``what`` supported fewer than requested."""
    if achieved >= requested:
        return f"{achieved:,} tokens"
    return f"{achieved:,} tokens ({what} supports only {achieved:,} of the {requested:,} requested)"


def _control_size(ctl: dict, t: dict) -> str:
    """The control vocabulary's size against the domain vocabulary's, which it is meant to equal."""
    n, domain = ctl.get("vocab_size", t["achieved_vocab_size"]), t["achieved_vocab_size"]
    if n == domain:
        return f"{n:,} tokens, the domain vocabulary's size"
    if n < domain:
        return f"{n:,} tokens (the control text supports only {n:,}; the domain vocabulary has {domain:,})"
    return f"{n:,} tokens (the domain vocabulary has {domain:,})"


def extension_sentence(ext: dict, rec: dict) -> str:
    """How many tokens the extended model adds and why: the recommendation's number, or the config's override."""
    n, recommended = ext.get("num_tokens", 0), ext.get("recommended_tokens", 0)
    if ext.get("source") == "override":
        return (
            f"{n:,} tokens added: vocab.extension.num_tokens = {ext.get('requested_tokens'):,} overrides the "
            f"recommendation ({recommended:,} tokens)."
        )
    if n == 0:
        return (
            "No token added: no word qualifies under the recommendation's rule 3, so the extended model is the "
            "base model unchanged (set vocab.extension.num_tokens to force an extension)."
        )
    why = (
        "as recommended"
        if rec.get("decision") == "extend"
        else (f"the words the recommendation's rule 3 counts (its decision is {rec.get('decision')})")
    )
    return f"{n:,} tokens added, {why}."


def published_comparison(p: PublishedOverlap, report: dict) -> dict:
    """A published overlap figure beside ours, with a sentence on why they differ."""
    ov = report["overlap"].get(p.reference)
    out = {
        "name": p.name,
        "reference": p.reference,
        "published_overlap": p.overlap,
        "published_vocab_size": p.vocab_size,
        "published_corpus_words": p.corpus_words,
        "source": p.source,
    }
    if ov is None:
        out["sentence"] = f"{p.name}: reference {p.reference!r} is not among this run's references."
        return out
    ours, ctl = ov["domain"]["domain_in_reference"], ov["control"]["domain_in_reference"]
    words, size = report["train"]["words"], report["tokenizer"]["achieved_vocab_size"]
    curve = report["curve"]
    sizes, values = curve["sizes"], curve["domain"][p.reference]
    out.update({"ours": ours, "control": ctl, "vocab_size": size, "corpus_words": words})
    out["sentence"] = (
        f"{p.name} reported that {pct(p.overlap)} of its {p.vocab_size:,}-token vocabulary is in {p.reference}'s; "
        f"our domain vocabulary ({size:,} tokens) shares {pct(ours)}. The figures are not directly comparable: "
        f"{p.name}'s vocabulary was trained on about {p.corpus_words:,.0f} words, {p.corpus_words / words:,.0f} "
        f"times our {words:,}, and overlap moves with the amount of text and the vocabulary size (our curve "
        f"goes from {pct(values[0])} at {sizes[0]:,} tokens to {pct(values[-1])} at {sizes[-1]:,}). A vocabulary "
        f"of the same size trained on as much general English (the control) shares {pct(ctl)}, so the part of "
        f"the gap due to the domain itself is {pct(ctl - ours)}."
    )
    return out


def _blocks(r: dict) -> list[tuple]:
    """The report's blocks, section by section."""
    return (
        _recommendation_blocks(r)
        + _overlap_blocks(r)
        + _curve_blocks(r["curve"])
        + _heldout_blocks(r)
        + _extension_blocks(r["extension"], r["recommendation"])
        + [("h2", "Method"), ("pre", OVERLAP_METHOD.strip()), ("pre", RECOMMEND_METHOD.strip())]
    )


def _recommendation_blocks(r: dict) -> list[tuple]:
    rec = r["recommendation"]
    decision = rec["decision"] + (
        f" (extend the vocabulary by {rec['extend_tokens']} tokens)" if rec["decision"] == "extend" else ""
    )
    b: list[tuple] = [("h2", "Recommendation"), ("p", f"{decision}: {rec['summary']}."), ("ul", rec["reasons"])]
    t, ctl, train = r["tokenizer"], r["control"], r["train"]
    b += [
        ("h2", "Domain tokenizer"),
        (
            "p",
            f"{t['kind']}, {'uncased' if t['lowercase'] else 'cased'}, "
            f"{_reached(t['achieved_vocab_size'], t['vocab_size'], 'the corpus')}, trained on "
            f"{train['documents']:,} documents, {train['words']:,} words ({train['bytes'] / 1e6:.2f} MB) in "
            f"{train['train_seconds']:.1f}s. Control: {ctl['words']:,} words of general text "
            f"({ctl['documents']:,} documents), {_control_size(ctl, t)}.",
        ),
    ]
    return b


def _overlap_blocks(r: dict) -> list[tuple]:
    b: list[tuple] = []
    rows = []
    for name, ov in r["overlap"].items():
        d, c, m = ov["domain"], ov["control"], ov["domain_matched"]
        rows.append(
            [
                name,
                pct(d["domain_in_reference"]),
                pct(m["domain_in_reference"]),
                pct(c["domain_in_reference"]),
                pct(c["domain_in_reference"] - m["domain_in_reference"]),
                pct(d["reference_in_domain"]),
                pct(d["surface_domain_in_reference"]),
                f"{d['shared']:,} / {d['domain_tokens']:,}",
            ]
        )
    b += [
        ("h2", "Vocabulary overlap"),
        (
            "p",
            "domain in reference: share of the domain vocabulary found in the reference (SciBERT's figure); "
            "equal words: the same for a domain vocabulary trained on as many words as the control (the "
            "domain vocabulary itself when the domain has fewer words); shift = control - equal words.",
        ),
        (
            "table",
            [
                "reference",
                "domain in reference",
                "domain, equal words",
                "control in reference",
                "shift (control - domain)",
                "reference in domain",
                "surface (position ignored)",
                "shared / domain tokens",
            ],
            rows,
        ),
    ]
    for p in r.get("published", []):
        b.append(("p", p["sentence"]))
    return b


def _curve_blocks(curve: dict) -> list[tuple]:
    b: list[tuple] = [
        ("img", "overlap_curve.png", "Share of the vocabulary found in each reference, by vocabulary size")
    ]
    crow = []
    for name in curve["domain"]:
        crow.append([f"{name} (domain)"] + [pct(x) for x in curve["domain"][name]])
        crow.append([f"{name} (control)"] + [pct(x) for x in curve["control"][name]])
    ctl_sizes = curve.get("control_sizes", curve["sizes"])
    b.append(
        (
            "table",
            ["vocabulary"]
            + [
                f"{s:,}" + (f" (control {c:,})" if c != s else "")
                for s, c in zip(curve["sizes"], ctl_sizes, strict=True)
            ],
            crow,
        )
    )
    if curve.get("unreached"):
        reach = curve["reach"]
        b.append(
            (
                "p",
                f"Requested curve sizes {_and(curve['unreached'])} were not reached: the domain corpus "
                f"supports {reach['domain']:,} tokens and the control text {reach['control']:,}, so the "
                f"curve stops at {curve['sizes'][-1]:,}"
                + (f" (control {ctl_sizes[-1]:,})" if ctl_sizes[-1] != curve["sizes"][-1] else "")
                + ". Every size above is the one measured.",
            )
        )
    return b


def _heldout_blocks(r: dict) -> list[tuple]:
    hrows = [
        [
            name,
            f"{h['fertility']:.3f}",
            pct(h["split_2plus"]),
            pct(h["split_3plus"]),
            f"{100 * h['unk_rate']:.2f}%",
            f"{h['mean_tokens_per_document']:.1f}",
            f"{h['length_vs_base']:.3f}",
        ]
        for name, h in r["heldout"].items()
    ]
    first = next(iter(r["heldout"].values()))
    b: list[tuple] = [
        ("h2", "Held-out domain text"),
        ("p", f"{first['documents']} validation documents, {first['words']:,} words (BERT pre-tokenisation)."),
        (
            "table",
            ["tokenizer", "fertility", "2+ pieces", "3+ pieces", "UNK rate", "tokens / document", "length vs base"],
            hrows,
        ),
        ("img", "fertility.png", "Sub-tokens per word and words cut into 3+ pieces, held-out domain text"),
    ]
    b.append(("h2", "Frequent domain words the base tokenizer fragments worst"))
    b.append(
        (
            "table",
            ["word", "count", "pieces"],
            [[w["word"], f"{w['count']:,}", " ".join(w["pieces"])] for w in r["fragmented_words"]["base"]],
        )
    )
    b.append(("h2", "Most frequent domain tokens missing from the base vocabulary"))
    b.append(("table", ["token", "count"], [[m["token"], f"{m['count']:,}"] for m in r["missing_tokens"]["base"]]))
    return b


def _extension_blocks(ext: dict, rec: dict) -> list[tuple]:
    b: list[tuple] = [("h2", "Vocabulary extension")]
    if "method" in ext:
        b.append(
            (
                "p",
                f"{extension_sentence(ext, rec)} Method {ext['method']}, {ext['candidates']:,} candidates; "
                f"extended vocabulary {ext['vocab_size']:,}; new embeddings = mean of the base pieces' "
                f"embeddings (AdaLM). Saved in extended-model/.",
            )
        )
        if ext["top"]:
            b.append(
                (
                    "table",
                    ["token", "count", "base pieces"],
                    [[x["word"], f"{x['count']:,}", " ".join(x["base_pieces"])] for x in ext["top"]],
                )
            )
    else:
        b.append(("p", "Not built (vocab.extension.enabled is false)."))
    return b


def _block(blk: tuple) -> Block:
    kind = blk[0]
    if kind == "p":
        return blk[1]
    if kind == "ul":
        return list(blk[1])
    if kind == "pre":
        return Code(blk[1])
    if kind == "img":
        return Figure(blk[1], blk[2])
    return Table(list(blk[1]), [[str(c) for c in row] for row in blk[2]])


def _document(title: str, blocks: list[tuple]) -> Document:
    """The blocks as a ``report.document.Document`` (the renderer every stage report uses)."""
    doc = Document(title)
    for blk in blocks:
        if blk[0] == "h2":
            doc.sections.append(Section(blk[1]))
        else:
            doc.sections[-1].add(_block(blk))
    return doc


def plot(report: dict, folder: Path) -> None:
    """Write overlap_curve.png and fertility.png."""
    curve = report["curve"]
    fig, ax = new_figure(figsize=(7, 4.2))
    for i, name in enumerate(curve["domain"]):
        color = f"C{i}"
        ax.plot(curve["sizes"], curve["domain"][name], "o-", color=color, label=f"domain vs {name}")
        ax.plot(
            curve.get("control_sizes", curve["sizes"]),
            curve["control"][name],
            "s--",
            color=color,
            label=f"control vs {name}",
        )
    ax.set_xlabel("vocabulary size")
    ax.set_ylabel("share of the vocabulary in the reference")
    ax.set_title(f"{report['domain']}: vocabulary overlap by size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_png(fig, folder / "overlap_curve.png")

    names = list(report["heldout"])
    fig, axes = new_figure(1, 2, figsize=(9, 3.8))
    axes[0].bar(names, [report["heldout"][n]["fertility"] for n in names], color="C0")
    axes[0].set_title("sub-tokens per word")
    axes[1].bar(names, [report["heldout"][n]["split_3plus"] for n in names], color="C1")
    axes[1].set_title("words cut into 3+ pieces")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.suptitle(f"{report['domain']}: held-out domain text")
    save_png(fig, folder / "fertility.png")


def write_report(report: dict, folder: Path) -> None:
    """Write report.json, the plots, report.md and report.html into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    checked = json.loads(json.dumps(report, default=str))  # tuples and paths as JSON has them
    validate_artifact(VocabReport, checked, folder / "report.json")
    (folder / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    plot(report, folder)
    title = f"Vocabulary report: {report['domain']} ({report['profile']})"
    doc = _document(title, _blocks(report))
    (folder / "report.md").write_text(to_markdown(doc), encoding="utf-8")
    (folder / "report.html").write_text(to_html(doc, folder), encoding="utf-8")
