"""What the Prefect UI gets: figures embedded within the artifact size limit, a report link readers can open."""

from __future__ import annotations

import base64

from domainbert.flows.publish import embed_figures, report_link

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def test_figures_are_embedded_until_the_limit_then_named(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "b.png").write_bytes(PNG * 40)
    md = "# R\n\n![first](a.png)\n\ntext\n\n![second](b.png)\n\n![gone](missing.png)\n"
    out = embed_figures(md, tmp_path, limit=600)
    assert f"![first](data:image/png;base64,{base64.b64encode(PNG).decode()})" in out
    assert "*[figure: second - b.png in the run folder]*" in out  # too large for what is left
    assert "*[figure: gone - missing.png in the run folder]*" in out and len(out) <= 600
    assert embed_figures(md, tmp_path).count("data:image/png;base64,") == 2


def test_report_link_uses_the_base_url_when_set(tmp_path, monkeypatch):
    html = tmp_path / "runs" / "science" / "report" / "report.html"
    html.parent.mkdir(parents=True)
    html.write_text("<html></html>")
    monkeypatch.delenv("DOMAINBERT_REPORT_BASE_URL", raising=False)
    url, text = report_link(html)
    assert url == html.resolve().as_uri() and text.startswith("report.html (a file on ")
    monkeypatch.setenv("DOMAINBERT_REPORT_BASE_URL", "https://reports.example.org/runs/")
    assert report_link(html) == ("https://reports.example.org/runs/science/report/report.html", "report.html")
