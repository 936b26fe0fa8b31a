"""A tiny document model (sections of paragraphs, tables and figures) rendered to Markdown and to HTML.

The report is built once as a ``Document`` and written twice, so the Markdown and the HTML always say the
same thing. The HTML is one self-contained file: the figures are embedded as base64 PNG data URIs and the
stylesheet is inline, so the page opens offline, can be mailed or attached to a Prefect run. The Markdown
links the same PNG files, which sit beside it in the report folder. This module knows nothing about
domainbert's artifacts; it leaves content to ``sections.py`` and layout beyond headings, paragraphs,
bullet lists, tables and images to the reader's browser. A table cell that starts with ``**text**`` is bold
in both outputs; a cell that is an ``Alert`` (a leak, a gap) is red and bold in the HTML and bold in the
Markdown. Every stage report (corpus, vocabulary, comparison) is rendered by this module; ``to_text`` renders
blocks as plain text for a terminal (the report's answer, printed at the end of a run).
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path


class Alert(str):
    """A table cell to show in red: something a reader must not miss (a leak allowed, a split not checked)."""


@dataclass
class Table:
    """A table with a header row; cells are already formatted strings."""

    headers: list[str]
    rows: list[list[str]]
    caption: str | None = None


@dataclass
class Figure:
    """A PNG file (a name inside the report folder) with its caption."""

    filename: str
    caption: str


@dataclass
class Code:
    """Preformatted text (a method description), shown as it is."""

    text: str


Block = str | list[str] | Table | Figure | Code


@dataclass
class Section:
    """A heading followed by blocks in order: paragraphs (str), bullet lists (list[str]), tables, figures,
    preformatted text."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2

    def add(self, *blocks: Block) -> Section:
        self.blocks.extend(blocks)
        return self


@dataclass
class Document:
    title: str
    sections: list[Section] = field(default_factory=list)
    footer: str | None = None


def _md_cell(text: str) -> str:
    # A pipe inside a cell would end it; newlines would end the row.
    clean = text.replace("|", "\\|").replace("\n", " ")
    return f"**{clean}**" if isinstance(text, Alert) else clean


def _plain(text: str) -> str:
    return text.replace("**", "")


def to_text(blocks: list[Block], width: int = 100) -> str:
    """Plain text for a terminal: paragraphs wrapped to ``width``, bullets as ``- ``, tables as aligned columns;
    figures and preformatted blocks are left out (they belong to the page)."""
    import textwrap

    out: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            rows = [block.headers, *block.rows]
            widths = [max(len(_plain(r[i])) for r in rows) for i in range(len(block.headers))]
            out += ["  ".join(_plain(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        elif isinstance(block, list):
            out += [textwrap.fill(_plain(item), width, initial_indent="- ", subsequent_indent="  ") for item in block]
        elif isinstance(block, str):
            out.append(textwrap.fill(_plain(block), width))
    return "\n".join(out) + "\n"


def to_markdown(doc: Document) -> str:
    """Render ``doc`` as GitHub-flavoured Markdown; figures link the PNG files beside the Markdown file."""
    out = [f"# {doc.title}", ""]
    for section in doc.sections:
        out += ["#" * section.level + f" {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                out += [block, ""]
            elif isinstance(block, list):
                out += [f"- {item}" for item in block] + [""]
            elif isinstance(block, Table):
                if block.caption:
                    out += [f"*{block.caption}*", ""]
                out.append("| " + " | ".join(_md_cell(h) for h in block.headers) + " |")
                out.append("|" + "|".join("---" for _ in block.headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
                out.append("")
            elif isinstance(block, Figure):
                out += [f"![{block.caption}]({block.filename})", "", f"*{block.caption}*", ""]
            elif isinstance(block, Code):
                out += ["```", block.text, "```", ""]
    if doc.footer:
        out += ["---", "", doc.footer, ""]
    return "\n".join(out)


STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #bbb; padding-bottom: .15em; margin-top: 1.8em; }
.table-wrap { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .8em 0 1.2em; font-size: 0.92em; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .3em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
tbody tr:nth-child(even) { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.alert { color: #c00; font-weight: bold; }
figure { margin: 1em 0 1.5em; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-style: italic; color: #555; font-size: 0.9em; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .5em; }
footer { margin-top: 3em; color: #666; font-size: 0.85em; border-top: 1px solid #ccc; padding-top: .5em; }
"""


def _looks_numeric(text: str) -> bool:
    stripped = text.strip().lstrip("+-").replace(",", "").replace(".", "", 1).rstrip("%")
    return bool(stripped) and stripped.split(" ")[0].isdigit()


def _html_table(table: Table) -> str:
    parts = ['<div class="table-wrap"><table>']  # a wide table scrolls in its box, not the page
    if table.caption:
        parts.append(f"<caption>{html.escape(table.caption)}</caption>")
    parts.append(
        "<thead><tr>"
        + "".join(f'<th scope="col">{html.escape(h)}</th>' for h in table.headers)
        + "</tr></thead><tbody>"
    )
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            if i == 0:
                cells.append(f'<th scope="row">{html.escape(cell)}</th>')
            elif isinstance(cell, Alert):
                cells.append(f'<td class="alert">{html.escape(cell)}</td>')
            else:
                bold = cell.startswith("**") and "**" in cell[2:]  # Markdown bold, as the Markdown output shows it
                text = cell.replace("**", "") if bold else cell
                cls = ' class="num"' if _looks_numeric(text) else ""
                inner = html.escape(text)
                if bold:
                    head, _, tail = cell[2:].partition("**")
                    inner = f"<strong>{html.escape(head)}</strong>{html.escape(tail)}"
                cells.append(f"<td{cls}>{inner}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table></div>")
    return "\n".join(parts)


def _html_figure(figure: Figure, folder: Path) -> str:
    path = folder / figure.filename
    caption = html.escape(figure.caption)
    if not path.is_file():
        return f"<p><em>Figure missing: {html.escape(figure.filename)}</em></p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{caption}"><figcaption>{caption}</figcaption></figure>'
    )


def to_html(doc: Document, figure_dir: Path) -> str:
    """Render ``doc`` as one self-contained HTML page.

    Args:
        doc: the document.
        figure_dir: the folder holding the PNG files the figures name (embedded as base64).

    Returns:
        The HTML text (no external CSS, JS, fonts or images).
    """
    body = [f"<h1>{html.escape(doc.title)}</h1>"]
    toc = [f'<li><a href="#s{i}">{html.escape(s.title)}</a></li>' for i, s in enumerate(doc.sections)]
    if len(doc.sections) > 2:
        body.append("<nav><ul>" + "".join(toc) + "</ul></nav>")
    for i, section in enumerate(doc.sections):
        level = min(max(section.level, 2), 6)
        body.append(f'<section id="s{i}"><h{level}>{html.escape(section.title)}</h{level}>')
        for block in section.blocks:
            if isinstance(block, str):
                body.append(f"<p>{html.escape(block)}</p>")
            elif isinstance(block, list):
                body.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block) + "</ul>")
            elif isinstance(block, Table):
                body.append(_html_table(block))
            elif isinstance(block, Figure):
                body.append(_html_figure(block, figure_dir))
            elif isinstance(block, Code):
                body.append(f"<pre>{html.escape(block.text)}</pre>")
        body.append("</section>")
    if doc.footer:
        body.append(f"<footer>{html.escape(doc.footer)}</footer>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(doc.title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
