"""The comparison report: one page per domain run and one across domains, from the runs' artifacts only.

Public API:
- ``compare.render_report(cfg, layout) -> Path``: report.html (self-contained), report.md, PNGs, results.json;
- ``compare.report_markdown(cfg, layout) -> str`` and ``compare.results_table(cfg, layout) -> list[dict]``:
  what the Prefect flows publish as artifacts;
- ``cross_domain.render_cross_domain(runs, out_dir) -> Path``: the page over several run folders.
"""
