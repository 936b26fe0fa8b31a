"""The verdict: the page's "Verdict:" line, from the rows alone.

Which arms beat the better reference (``base``, or ``original`` after a warm-up: ``results.best_reference``) on
a task, under the page's family-wise correction (``Comparison.verdict``), and, when none did, why: every task is
one that cannot separate the arms (``uninformative_tasks``: saturated, or every model under the floor), an arm's
results are incomplete (``incomplete_models``, from the run's ``inputs.ResultCheck``), or the run fine-tuned no
arm or no reference. This is the last module of the route from a result file to the verdict
(``inputs -> results -> rows -> verdict``, docs/architecture.md); it reads typed rows only and imports no module
that writes the page's other sentences. Those are ``headline.py``'s (the table and caveats),
``references.py``'s (each arm's difference, power) and ``adequacy.py``'s (why a task cannot tell). Nothing
statistical is decided here: the rows carry Holm's reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from domainbert.report.inputs import ResultCheck
from domainbert.report.results import FLOOR_MODEL, ORIGINAL_MODEL, REFERENCES, best_reference
from domainbert.report.rows import NO_DIFFERENCE, Comparison, ScoreRow

CEILING = 0.95  # a floor at or above this score leaves no room for an encoder to show anything
NEAR_CEILING = 0.97  # every model at or above this: the task is saturated
VERDICTS = ("better", "worse", NO_DIFFERENCE)


@dataclass(frozen=True)
class Uninformative:
    """Why a task cannot separate the arms: the floor at the ceiling (``floor-saturated``), every model near it
    (``saturated``), or every model under the floor (``underfit``); ``best``: the task's best model (the floor
    aside), ``floor``: the floor's row where it ran."""

    kind: Literal["floor-saturated", "saturated", "underfit"]
    best: ScoreRow
    floor: ScoreRow | None


def uninformative_tasks(scores: Sequence[ScoreRow]) -> dict[str, Uninformative]:
    """Task -> why it cannot separate the arms (informative tasks are absent), in the order of ``scores``."""
    out: dict[str, Uninformative] = {}
    for task in dict.fromkeys(r.task for r in scores):
        models = [r for r in scores if r.task == task and r.model != FLOOR_MODEL]
        floor = next((r for r in scores if r.task == task and r.model == FLOOR_MODEL), None)
        if not models:
            continue
        best = max(models, key=lambda r: r.mean)
        if floor is not None and floor.mean >= CEILING:
            out[task] = Uninformative("floor-saturated", best, floor)
        elif min(r.mean for r in models) >= NEAR_CEILING:
            out[task] = Uninformative("saturated", best, floor)
        elif floor is not None and best.mean < floor.mean:
            out[task] = Uninformative("underfit", best, floor)
    return out


def comparison_of(comparisons: Sequence[Comparison], task: str, model: str, reference: str) -> Comparison | None:
    """``model`` against ``reference`` on ``task``, where the two were compared."""
    return next(
        (c for c in comparisons if (c.task, c.model, c.reference) == (task, model, reference) and c.diff is not None),
        None,
    )


def against_best_reference(scores: list[ScoreRow], comparisons: list[Comparison], model: str) -> list[Comparison]:
    """``model``'s comparison with the better reference on every task where both have results."""
    out = []
    for task in dict.fromkeys(r.task for r in scores):
        ref = best_reference(scores, task)
        row = comparison_of(comparisons, task, model, ref) if ref and ref != model else None
        if row is not None:
            out.append(row)
    return out


def arm_tally(scores: list[ScoreRow], comparisons: list[Comparison], model: str) -> dict[str, list[Comparison]]:
    """``model``'s comparisons with the better reference, by verdict (better, worse, no significant difference)."""
    rows = against_best_reference(scores, comparisons, model)
    return {v: [c for c in rows if c.verdict == v] for v in VERDICTS}


def between_arms(comparisons: list[Comparison], arms: list[str]) -> list[Comparison]:
    """The page's comparisons of one arm with another (continued - scratch, continued - control) that have a
    difference."""
    return [c for c in comparisons if c.model in arms and c.reference in arms and c.diff is not None]


def incomplete_models(check: ResultCheck | None, tasks: set[str]) -> list[str]:
    """Models (the floor aside) with an expected result missing or stale on one of ``tasks`` (those with scores;
    a task no model has run is named as not run), in name order."""
    names = (*check.missing, *check.stale, *check.damaged) if check is not None else ()
    runs = [run.split("/") for run in names]
    return sorted({run[0] for run in runs if len(run) == 3 and run[1] in tasks} - {FLOOR_MODEL})


VerdictKind = Literal["gain", "uninformative", "withheld", "no-arm", "no-reference", "no-gain"]


@dataclass(frozen=True)
class Verdict:
    """The page's verdict: ``gain`` (``winners`` beat ``reference``, the better reference's name as the page says
    it), ``uninformative`` (no task can separate the arms), ``withheld`` (no arm has all its results),
    ``no-arm`` (no arm was fine-tuned), ``no-reference`` (no reference was; ``between``: the arms were compared
    with each other) or ``no-gain`` (``judged_complete``: some arms were left out as incomplete)."""

    kind: VerdictKind
    reference: str
    winners: tuple[str, ...] = ()
    between: bool = False
    judged_complete: bool = False

    @property
    def line(self) -> str:
        """The "Verdict:" sentence."""
        if self.kind == "gain":
            return f"Verdict: {', '.join(self.winners)} beat {self.reference} on at least one task (details below)."
        if self.kind == "uninformative":
            return "Verdict: none: no task can separate the arms at this fine-tuning budget (see below)."
        if self.kind == "withheld":
            return "Verdict: withheld: no adaptation arm has all its results."
        if self.kind == "no-arm":
            return "Verdict: none: no adaptation arm was fine-tuned in this run; the page compares the models it ran."
        if self.kind == "no-reference":
            return (
                "Verdict: none: no reference (base or original) was fine-tuned in this run, so no arm is compared "
                "with one; the page compares the models it ran with the floor"
                + (", and the arms with each other (below)." if self.between else ".")
            )
        judged = " with complete results" if self.judged_complete else ""
        return f"Verdict: no adaptation arm{judged} beat {self.reference} on any task at this budget."


def decide(
    scores: list[ScoreRow],
    comparisons: list[Comparison],
    arms: list[str],
    uninformative: Sequence[str],
    incomplete: list[str],
) -> Verdict:
    """The verdict over ``arms`` and ``comparisons`` (those judged: on complete results and tasks that can
    separate the arms; ``uninformative``: the tasks that cannot, ``uninformative_tasks``; ``incomplete``: the
    models left out, ``incomplete_models``)."""
    winners = tuple(a for a in arms if arm_tally(scores, comparisons, a)["better"])
    present = {r.model for r in scores} & set(REFERENCES)
    if len(present) == 2:
        refs = sorted({ref for t in {r.task for r in scores} if (ref := best_reference(scores, t))})
        which = f"the better reference ({' or '.join(refs)})"
    else:  # only_models kept one reference (or none): name the one the arms were compared with
        which = "the original checkpoint" if present == {ORIGINAL_MODEL} else "the base model"
    if winners:
        return Verdict("gain", which, winners)
    if uninformative and len(uninformative) == len({r.task for r in scores}):
        return Verdict("uninformative", which)
    if incomplete and not arms:
        return Verdict("withheld", which)
    if not {r.model for r in scores} & set(arms):  # only_models left every arm out: no adaptation was judged
        return Verdict("no-arm", which)
    if not present:  # only_models left both references out: no arm was compared with one
        return Verdict("no-reference", which, between=bool(between_arms(comparisons, arms)))
    return Verdict("no-gain", which, judged_complete=bool(incomplete))
