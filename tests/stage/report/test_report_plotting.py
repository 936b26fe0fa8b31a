"""The shared figure set-up: PNGs of a fixed size and bytes, no pyplot, the process's backend left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

from domainbert.core.plotting import new_figure, save_png


def _draw(path: Path, **save) -> Path:
    fig, ax = new_figure(figsize=(4, 2.5))
    ax.plot([0, 1, 2], [3, 1, 2], label="loss")
    ax.set_title("a title that tight_layout has to make room for")
    ax.legend()
    return save_png(fig, path, **save)


def test_png_size_follows_dpi_and_bytes_carry_no_matplotlib_version(tmp_path: Path) -> None:
    a, b = _draw(tmp_path / "a.png", dpi=50), _draw(tmp_path / "b.png", dpi=50)
    assert a == tmp_path / "a.png"
    with Image.open(a) as img:
        assert img.size == (200, 125)
        assert "Software" not in img.info
    assert a.read_bytes() == b.read_bytes()
    with Image.open(_draw(tmp_path / "c.png")) as img:
        assert img.size == (440, 275)  # the report's default resolution


def test_fixed_margins_replace_tight_layout(tmp_path: Path) -> None:
    fig, ax = new_figure(1, 2, figsize=(4, 2))
    assert len(ax) == 2
    save_png(fig, tmp_path / "m.png", margins={"left": 0.2, "right": 0.9, "bottom": 0.25, "top": 0.8})
    assert (fig.subplotpars.left, fig.subplotpars.top) == (0.2, 0.8)
    fig, axes = new_figure(1, 1, figsize=(4, 2), squeeze=False)
    assert axes.shape == (1, 1)
    save_png(fig, tmp_path / "t.png")
    assert fig.subplotpars.left != 0.2


_EVERY_PLOT = """
import json, sys
from pathlib import Path
import numpy as np
import matplotlib
out = Path(sys.argv[1])
from domainbert.corpus.report import plot_lengths
from domainbert.pretrain.outputs import plot_loss
from domainbert.report import figures
from domainbert.vocab.report import plot
plot_lengths(np.array([1, 5, 40, 300]), out / "lengths.png")
plot_loss([[0, 9.0], [10, 4.0]], out / "loss.png")
from domainbert.report.scratch_curve import ArmCurve
figures.loss_curves({"continued": ArmCurve.of({"loss_curve": [[0, 9.0], [1, 8.0]]})}, {}, out)
from domainbert.report.rows import ScoreRow
figures.domain_bars([ScoreRow("ner", "ner", "f1", "base", (1,), 1, 1, (0.5,), 0.5, 0.1, 0, 0, None, "law")], out)
report = {"domain": "law", "curve": {"sizes": [10, 20], "domain": {"base": [0.5, 0.6]},
          "control": {"base": [0.4, 0.5]}}, "heldout": {"base": {"fertility": 1.4, "split_3plus": 0.1}}}
plot(report, out)
print(json.dumps({"pyplot": "matplotlib.pyplot" in sys.modules, "backend": matplotlib.rcParams["backend"],
                  "pngs": sorted(p.name for p in out.glob("*.png"))}))
"""


def test_every_plot_draws_without_pyplot_or_a_backend_switch(tmp_path: Path) -> None:
    env = {**os.environ, "MPLBACKEND": "svg"}  # a caller's backend: drawing a report must not replace it
    done = subprocess.run([sys.executable, "-c", _EVERY_PLOT, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["pyplot"] is False and seen["backend"] == "svg"
    assert seen["pngs"] == ["cross_domain_scores.png", "fertility.png", "lengths.png", "loss.png",
                            "overlap_curve.png", "pretrain_loss.png"]


def test_perplexity_panels_start_at_zero_or_go_log_over_a_wide_range(tmp_path: Path, monkeypatch) -> None:
    """A 2% change in general perplexity must not fill its panel (issue #21); a from-scratch arm's 30,000 -> 600
    needs the log scale."""
    from domainbert.report import figures

    drawn = []
    monkeypatch.setattr(figures, "_save", lambda fig, out_dir, name: drawn.append(fig) or name)

    def evals(domain: tuple[float, float], general: tuple[float, float]) -> list[dict]:
        return [{"kind": "eval", "step": s, "domain_perplexity": d, "general_perplexity": g}
                for s, d, g in ((0, domain[0], general[0]), (40, domain[1], general[1]))]

    from domainbert.report.scratch_curve import MetricPoint

    points = [MetricPoint.of(r) for r in evals((30000.0, 600.0), (214.0, 218.0))]
    assert figures.perplexity_curves({"continued": points}, tmp_path)
    domain_ax, general_ax = drawn[0].axes
    assert domain_ax.get_yscale() == "log"
    assert general_ax.get_yscale() == "linear" and general_ax.get_ylim()[0] == 0.0
    assert general_ax.get_ylim()[1] >= 218.0
