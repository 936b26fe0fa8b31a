"""The report in a real browser (Debian's chromium-headless-shell): every figure loads, nothing is wider than
the window at a desktop and a narrow width, and the screenshot shows a page, not a blank one."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.report.compare import render_report

# Run after the load event: what the browser made of the page, written into the DOM that --dump-dom prints.
CHECK = """<script>
// inside a box that scrolls or clips sideways (a wide table's wrapper): not the page's overflow
const scrolls = e => { for (let p = e.parentElement; p; p = p.parentElement)
  if (getComputedStyle(p).overflowX !== 'visible') return true; return false; };
window.addEventListener('load', () => {
  const root = document.documentElement;
  const out = {
    images: document.images.length,
    broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    scrollWidth: root.scrollWidth, clientWidth: root.clientWidth,
    wide: [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > root.clientWidth + 1
      && !scrolls(e)).map(e => e.tagName).slice(0, 5),
  };
  const pre = document.createElement('pre');
  pre.id = 'browser-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _browser() -> str:
    found = shutil.which("chromium-headless-shell")
    if found is None:
        msg = "chromium-headless-shell is not installed (run scripts/ci_services.sh)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return found


def _run(browser: str, width: int, *args: str) -> str:
    cmd = [browser, "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},900", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.fixture
def report(science_run: Path) -> Path:
    cfg = load_domain("science", ["compare.bootstrap_samples=200", "pretrain.arms=[continued, scratch]"])
    render_report(cfg, RunLayout(science_run))
    return science_run / "report" / "report.html"


@pytest.mark.parametrize("width", [1280, 820])
def test_figures_load_and_nothing_overflows_the_window(report: Path, width: int) -> None:
    browser = _browser()
    checked = report.with_name("browser-check.html")  # beside the report: the figures' relative paths hold
    checked.write_text(report.read_text(encoding="utf-8").replace("</body>", CHECK + "</body>"), encoding="utf-8")
    dom = _run(browser, width, "--virtual-time-budget=5000", "--dump-dom", checked.as_uri())
    found = re.search(r'<pre id="browser-check">(.*?)</pre>', dom, re.S)
    assert found, "the check did not run"
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert out["images"] >= 5 and out["broken"] == [], out
    assert out["scrollWidth"] <= out["clientWidth"] and out["wide"] == [], json.dumps(out)


def test_the_page_opens_with_the_answer_figure(report: Path, tmp_path: Path) -> None:
    """The first image of the page is the answer at a glance, drawn with an interval per arm (not a blank)."""
    html = report.read_text(encoding="utf-8")
    first = html.index("<img")
    assert html.index("<h2>Headline</h2>") < first < html.index("<table")
    caption = html.index("<figcaption>", first)
    assert html[caption:].startswith("<figcaption>Each arm&#x27;s difference from the better reference")
    shot = tmp_path / "answer.png"
    _run(_browser(), 1280, f"--screenshot={shot}", report.with_name("answer.png").as_uri())
    with Image.open(shot) as img:
        gray = img.convert("L")
        assert sum(gray.histogram()[:128]) > 0.001 * img.size[0] * img.size[1]  # drawn marks, not an empty image


def test_the_screenshot_is_a_page(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _run(_browser(), 1280, f"--screenshot={shot}", report.as_uri())
    with Image.open(shot) as img:
        assert img.size == (1280, 900)
        gray = img.convert("L")
        low, high = gray.getextrema()
        dark = sum(gray.histogram()[:128])
    assert high - low > 100 and dark > 0.002 * 1280 * 900  # text on a background, not an empty page
