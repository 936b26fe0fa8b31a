"""The one matplotlib set-up behind every PNG the pipeline draws: how a figure is made and how it is saved.

- ``new_figure``: a bare ``matplotlib.figure.Figure`` on an Agg canvas, with its axes (``Figure.subplots``
  arguments). pyplot is never used: no backend is selected for the process (a notebook that renders a report
  keeps its own), no figure is registered, so none has to be closed and none is left open when drawing fails,
  and importing pyplot's backend machinery is skipped;
- ``save_png``: lay the figure out (``tight_layout``, or fixed ``margins`` where layout is too slow) and write
  a PNG without matplotlib's version in its metadata, so the same numbers give the same bytes after an
  upgrade of matplotlib;
- ``preload``: import what drawing needs ahead of time (the corpus build does it in a background thread).

matplotlib is imported on first use, so the stages that import their report modules pay nothing until they
draw. What each figure shows is up to its module (``report.figures``, ``vocab.report``, ``corpus.report``,
``pretrain.outputs``); this module draws nothing and sets no style.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 110  # the report pages' figures; the corpus histogram and the model card's loss plot pass their own


def preload() -> None:
    """Import the figure and canvas classes ``new_figure`` uses."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401


def new_figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    figsize: tuple[float, float],
    squeeze: bool = True,
) -> tuple[Figure, Any]:
    """A figure of ``figsize`` inches and its ``nrows`` x ``ncols`` axes (one ``Axes`` when both are 1 and
    ``squeeze``, else an array, as ``Figure.subplots`` returns them)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=squeeze)


def save_png(fig: Figure, path: Path, *, dpi: int = DPI, margins: dict[str, float] | None = None) -> Path:
    """Write ``fig`` to ``path`` as PNG and return ``path``.

    Args:
        fig: a figure from ``new_figure``.
        path: the PNG file (its folder must exist).
        dpi: pixels per inch; with the figure size it fixes the image's size in pixels.
        margins: ``Figure.subplots_adjust`` arguments (``left``, ``right``, ``bottom``, ``top``, ...) instead of
            ``tight_layout``, which measures every label and costs noticeable time on a large figure.
    """
    if margins is None:
        fig.tight_layout()
    else:
        fig.subplots_adjust(**margins)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    return path
