"""Publish stage reports as Prefect artifacts (Markdown, tables, links) so they show in the UI.

The content comes from the report stage (the rendered ``report.md`` and ``results.json``, ``read_rendered``) and from the Markdown
reports the corpus and vocab stages write; this module only names and uploads them. The UI cannot read PNG
files on a worker, so figures are embedded as data URIs while the artifact stays under
``MAX_MARKDOWN_CHARS`` (a figure that does not fit is named, not linked to a file nobody can open). The
report link points at ``DOMAINBERT_REPORT_BASE_URL`` + the report's path under the runs folder when that is set
(the run folder served or synced somewhere readers can reach), else at the worker's file. Artifact keys are the
domain name plus the report kind (lowercase letters, digits and dashes, as Prefect requires), so each new
run of a domain adds a version under the same key.
"""

from __future__ import annotations

import base64
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout

# Prefect stores artifacts in its database; keep a very long Markdown report from bloating it.
MAX_MARKDOWN_CHARS = 200_000


def artifact_key(*parts: str) -> str:
    """A valid artifact key: lowercase, ``[a-z0-9-]`` only."""
    key = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return re.sub(r"-{2,}", "-", key) or "domainbert"


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+\.png)\)")


def embed_figures(markdown: str, folder: Path, limit: int = MAX_MARKDOWN_CHARS) -> str:
    """``markdown`` with each ``![caption](file.png)`` of ``folder`` embedded as a data URI, in order, while
    the text stays within ``limit``; a figure that does not fit (or is missing) becomes its caption and name."""
    text = markdown[:limit]
    out, last, size = [], 0, len(text)
    for match in _IMAGE.finditer(text):
        caption, name = match.group(1), match.group(2)
        path = folder / name
        data = base64.b64encode(path.read_bytes()).decode("ascii") if path.is_file() else None
        replacement = f"![{caption}](data:image/png;base64,{data})" if data else ""
        if not replacement or size - len(match.group(0)) + len(replacement) > limit:
            replacement = f"*[figure: {caption or name} - {name} in the run folder]*"
        size += len(replacement) - len(match.group(0))
        out += [text[last : match.start()], replacement]
        last = match.end()
    return "".join(out) + text[last:]


def report_link(html: Path) -> tuple[str, str]:
    """(URL, link text) of a report: under ``DOMAINBERT_REPORT_BASE_URL`` when set, else the worker's file."""
    base = os.environ.get("DOMAINBERT_REPORT_BASE_URL")
    html = html.resolve()
    if base:
        # <base>/<run folder name>/.../report.html: the runs folder is what is served or synced
        rel = html.relative_to(html.parents[2]).as_posix()
        return f"{base.rstrip('/')}/{rel}", html.name
    return html.as_uri(), f"{html.name} (a file on {socket.gethostname()})"


def publish_markdown_file(path: Path, key: str, description: str) -> str | None:
    """Publish a Markdown file (figures embedded) if it exists; returns the artifact id (None when absent)."""
    if not path.is_file():
        return None
    text = embed_figures(path.read_text(encoding="utf-8"), path.parent)
    return str(create_markdown_artifact(markdown=text, key=key, description=description))


def publish_report(cfg: DomainConfig, layout: RunLayout, html: Path) -> dict[str, str]:
    """Publish the comparison report (Markdown), its results table and a link to report.html."""
    from domainbert.report.compare import read_rendered

    markdown, table = read_rendered(html.parent)  # what render_report just wrote: nothing is computed again
    ids: dict[str, str] = {}
    ids["report"] = str(
        create_markdown_artifact(
            markdown=embed_figures(markdown, html.parent),
            key=artifact_key(cfg.name, "report"),
            description=f"domainbert comparison report for {cfg.name}",
        )
    )
    rows = [{k: _cell(v) for k, v in row.items()} for row in table]
    ids["results"] = str(
        create_table_artifact(
            table=rows, key=artifact_key(cfg.name, "results"), description=f"Fine-tuning results for {cfg.name}"
        )
    )
    link, text = report_link(html)
    ids["html"] = str(
        create_link_artifact(link=link, link_text=f"{cfg.name} {text}", key=artifact_key(cfg.name, "report-html"))
    )
    return ids


def _cell(value: object) -> str | int | float | bool | None:
    """Table cells must be JSON scalars."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def publish_cross_domain(domains: list[str], html: Path) -> None:
    """Publish the cross-domain page (its report.md beside report.html) and a link to the HTML."""
    key = artifact_key("cross-domain", *domains)
    publish_markdown_file(html.with_name("report.md"), key, "domainbert cross-domain comparison")
    link, text = report_link(html)
    create_link_artifact(link=link, link_text=f"cross-domain {text}", key=f"{key}-html")
