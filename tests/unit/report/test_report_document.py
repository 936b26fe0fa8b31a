"""The document model renders the same content to Markdown and to one self-contained HTML page."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from domainbert.core.document import Document, Figure, Section, Table, to_html, to_markdown
from support.report import PNG_1X1


def _doc() -> Document:
    return Document("Report <x>", [
        Section("Scores").add("A & B paragraph.", ["first", "second"],
                              Table(["model", "F1 | micro"], [["base", "64.4"], ["<b>", "96.1"]], "cap")),
        Section("Plots").add(Figure("plot.png", "the plot"), Figure("absent.png", "gone")),
    ], footer="made here")


def test_markdown_has_tables_lists_and_figure_links() -> None:
    md = to_markdown(_doc())
    assert md.startswith("# Report <x>\n")
    assert "| model | F1 \\| micro |\n|---|---|\n| base | 64.4 |" in md  # a pipe in a cell is escaped
    assert "- first\n- second" in md
    assert "![the plot](plot.png)" in md
    assert md.rstrip().endswith("made here")


def test_html_is_self_contained_escaped_and_has_headers(tmp_path: Path) -> None:
    (tmp_path / "plot.png").write_bytes(PNG_1X1)
    page = to_html(_doc(), tmp_path)
    # No external resources: no src/href other than data URIs and in-page anchors.
    assert not re.search(r'(src|href)="(?!data:|#)', page)
    assert "<link" not in page and "<script" not in page
    embedded = re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(embedded) == PNG_1X1
    assert '<th scope="col">F1 | micro</th>' in page
    assert '<th scope="row">&lt;b&gt;</th>' in page and '<td class="num">96.1</td>' in page
    assert "<title>Report &lt;x&gt;</title>" in page and "A &amp; B paragraph." in page
    assert "Figure missing: absent.png" in page
