"""The headline's forgetting line: each arm's paired difference on the domain's tasks and on general English,
read after Holm's correction over the page."""

from __future__ import annotations

from dataclasses import replace

from domainbert.report.forgetting import forgetting_lines, forgetting_paragraph
from domainbert.report.rows import FamilyWise
from support.report import comparison, score

DOMAIN, GENERAL = "science-subject", "general-lexname"


def _page(general_significant: bool):
    scores = [score(t, m, v) for t in (DOMAIN, GENERAL) for m, v in (("base", 0.70), ("continued", 0.72))]
    gain = comparison(0.001, 0.01, 0.03, 0.02, task=DOMAIN, family=FamilyWise(4, 0.004, True, 0.9875, 0.005, 0.035))
    # the interval alone calls it a loss; Holm's correction decides whether the claim survives
    loss = comparison(0.02, -0.025, -0.005, -0.015, task=GENERAL,
                      family=FamilyWise(4, 0.02 if general_significant else 0.08, general_significant, 0.9875,
                                        -0.03 if general_significant else -0.03, -0.002 if general_significant else 0.001))
    return scores, [gain, loss]


def test_the_line_states_both_sides_after_holm():
    scores, comparisons = _page(general_significant=True)
    lines = forgetting_lines(scores, comparisons, ["continued"], {GENERAL})
    assert lines == [
        "continued: +2.0 on science-subject (significant); -1.5 on general English (general-lexname) (significant); "
        "paired against base, after Holm."
    ]


def test_a_loss_that_does_not_survive_holm_is_read_as_not_significant():
    scores, comparisons = _page(general_significant=False)
    (line,) = forgetting_lines(scores, comparisons, ["continued"], {GENERAL})
    assert "-1.5 on general English (general-lexname) (not significant)" in line


def test_no_general_task_or_no_comparison_on_it_gives_no_line():
    scores, comparisons = _page(general_significant=True)
    assert forgetting_paragraph(scores, comparisons, ["continued"], set()) == []
    assert forgetting_paragraph(scores, comparisons[:1], ["continued"], {GENERAL}) == []
    # an arm without a comparison on the general task gets no line; the one with it does
    other = replace(comparisons[0], model="control")
    block = forgetting_paragraph(scores, [*comparisons, other], ["control", "continued"], {GENERAL})
    assert len(block) == 2 and block[1].startswith("continued: ")
