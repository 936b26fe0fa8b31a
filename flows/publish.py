"""Publish stage reports as Prefect artifacts (Markdown, tables, links) so they show in the UI.

The content comes from the report stage (``report_markdown``, ``results_table``) and from the Markdown
reports the corpus and vocab stages write; this module only names and uploads them. Artifact keys are the
domain name plus the report kind (lowercase letters, digits and dashes, as Prefect requires), so each new
run of a domain adds a version under the same key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

# Prefect stores artifacts in its database; keep a very long Markdown report from bloating it.
MAX_MARKDOWN_CHARS = 200_000


def artifact_key(*parts: str) -> str:
    """A valid artifact key: lowercase, ``[a-z0-9-]`` only."""
    key = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return re.sub(r"-{2,}", "-", key) or "domainbert"


def publish_markdown_file(path: Path, key: str, description: str) -> str | None:
    """Publish a Markdown file if it exists; returns the artifact id (None when the file is absent)."""
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")[:MAX_MARKDOWN_CHARS]
    return str(create_markdown_artifact(markdown=text, key=key, description=description))


def publish_report(cfg: Any, layout: Any, html: Path) -> dict[str, str]:
    """Publish the comparison report (Markdown), its results table and a link to report.html."""
    from domainbert.report.compare import report_markdown, results_table

    ids: dict[str, str] = {}
    ids["report"] = str(create_markdown_artifact(
        markdown=report_markdown(cfg, layout)[:MAX_MARKDOWN_CHARS], key=artifact_key(cfg.name, "report"),
        description=f"domainbert comparison report for {cfg.name}"))
    rows = [{k: _cell(v) for k, v in row.items()} for row in results_table(cfg, layout)]
    ids["results"] = str(create_table_artifact(table=rows, key=artifact_key(cfg.name, "results"),
                                               description=f"Fine-tuning results for {cfg.name}"))
    ids["html"] = str(create_link_artifact(link=html.resolve().as_uri(), link_text=f"{cfg.name} report.html",
                                           key=artifact_key(cfg.name, "report-html")))
    return ids


def _cell(value: Any) -> Any:
    """Table cells must be JSON scalars."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def publish_cross_domain(domains: list[str], html: Path) -> None:
    """Publish the cross-domain page (its report.md beside report.html) and a link to the HTML."""
    key = artifact_key("cross-domain", *domains)
    publish_markdown_file(html.with_name("report.md"), key, "domainbert cross-domain comparison")
    create_link_artifact(link=html.resolve().as_uri(), link_text="cross-domain report.html", key=f"{key}-html")
