"""The answer figure draws what the rows say: a collapsed arm never as a filled (significant) point, and the
family-wise interval the verdict uses beside the 95% one."""

from __future__ import annotations

from domainbert.report.answer_figure import _draw_row
from domainbert.report.rows import Comparison, FamilyWise
from support.report import comparison


class Axes:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def plot(self, *args, **kwargs):
        self.calls.append(("plot", args, kwargs))

    def errorbar(self, *args, **kwargs):
        self.calls.append(("errorbar", args, kwargs))


def row(**extra) -> Comparison:
    return comparison(0.001, -0.9, -0.5, -0.7, family=FamilyWise(1, 0.001, True, 0.99, -1.0, -0.4), **extra)


def test_a_significant_row_is_filled_and_shows_its_family_wise_interval():
    ax = Axes()
    _draw_row(ax, 0, row())
    (plot, bar) = ax.calls
    assert plot[1] == ([-100.0, -40.0], [0, 0])  # the verdict's interval, in points
    assert bar[2]["fmt"] == "o" and bar[2]["markerfacecolor"] == "tab:blue"


def test_a_collapsed_arm_is_a_cross_never_a_filled_point_even_when_its_difference_survives():
    ax = Axes()
    _draw_row(ax, 0, row(collapsed={"scratch": 3}))
    bar = ax.calls[-1]
    assert bar[2]["fmt"] == "x" and bar[2]["markerfacecolor"] == "white" and bar[2]["color"] == "0.5"
