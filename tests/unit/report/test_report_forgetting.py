"""The headline's forgetting line: each arm's paired difference on the domain's tasks and on general English,
read after Holm's correction over the page."""

from __future__ import annotations

from dataclasses import replace

from domainbert.report.forgetting import forgetting_lines, forgetting_paragraph
from domainbert.report.rows import FamilyWise
from support.report import comparison, score

DOMAIN, GENERAL = "science-subject", "general-lexname"


def _page(general_significant: bool):
    means = {(DOMAIN, "base"): 0.70, (DOMAIN, "continued"): 0.72, (GENERAL, "base"): 0.70, (GENERAL, "continued"): 0.685}
    scores = [score(t, m, v) for (t, m), v in means.items()]
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
        "continued: +2.0 on science-subject against base (significant); -1.5 on general English (general-lexname) "
        "against base (significant); paired, after Holm."
    ]


def test_each_task_names_its_own_better_reference():
    scores, comparisons = _page(general_significant=True)
    scores += [score(GENERAL, "original", 0.72)]  # on general English the original checkpoint is the better one
    comparisons += [comparison(0.5, -0.06, 0.01, -0.035, task=GENERAL, reference="original",
                               family=FamilyWise(4, 0.5, False, 0.9875, -0.07, 0.02))]
    (line,) = forgetting_lines(scores, comparisons, ["continued"], {GENERAL})
    assert "+2.0 on science-subject against base" in line
    assert "-3.5 on general English (general-lexname) against original (not significant)" in line


def test_a_loss_that_does_not_survive_holm_is_read_as_not_significant():
    scores, comparisons = _page(general_significant=False)
    (line,) = forgetting_lines(scores, comparisons, ["continued"], {GENERAL})
    assert "-1.5 on general English (general-lexname) against base (not significant)" in line


def test_no_general_task_or_no_comparison_on_it_gives_no_line():
    scores, comparisons = _page(general_significant=True)
    assert forgetting_paragraph(scores, comparisons, ["continued"], set()) == []
    assert forgetting_paragraph(scores, comparisons[:1], ["continued"], {GENERAL}) == []
    # an arm without a comparison on the general task gets no line; the one with it does
    other = replace(comparisons[0], model="control")
    block = forgetting_paragraph(scores, [*comparisons, other], ["control", "continued"], {GENERAL})
    assert block == [f"Forgetting, {forgetting_lines(scores, comparisons, ['continued'], {GENERAL})[0]}"]


def test_the_headline_keeps_the_general_task_out_of_the_domain_verdict(tmp_path):
    from domainbert.core.document import Document, to_markdown
    from domainbert.report.headline import headline_section
    from domainbert.report.inputs import RunArtifacts

    scores, comparisons = _page(general_significant=True)
    arts = RunArtifacts(root=tmp_path)

    def page(general: set[str]) -> list[str]:
        sec = headline_section(scores, comparisons, arts, ["continued"], [], [], None, 3, general=general)
        return to_markdown(Document("page", [sec])).splitlines()

    lines = page({GENERAL})
    assert any(line.startswith("- Forgetting, continued: +2.0 on science-subject") for line in lines)
    verdict = [line for line in lines if line.startswith("- continued: beat base")]
    assert verdict and all(GENERAL not in line for line in verdict)
    # without the role, the same task is one of the domain's: the verdict names it, no forgetting line
    plain = page(set())
    assert any(line.startswith("- continued:") and GENERAL in line and "after Holm." not in line for line in plain)
    assert not any("Forgetting" in line for line in plain)
