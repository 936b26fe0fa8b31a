"""The verdict: the page's "Verdict:" line, from the rows alone.

Which arms beat the better reference (``base``, or ``original`` after a warm-up: ``results.best_reference``) on
a task, under the page's family-wise correction (``Comparison.verdict``), and, when none did, why: every task is
one that cannot separate the arms (``uninformative_tasks``: saturated, or every model under the floor), an arm's
results are incomplete (``incomplete_models``, from the run's ``inputs.ResultCheck``), or the run fine-tuned no
arm or no reference. This is the last module of the route from a result file to the verdict
(``inputs -> results -> rows -> verdict``, docs/architecture.md); it reads typed rows only and imports no module
that writes the page's other sentences. Those are ``headline.py``'s (the table and caveats),
``references.py``'s (each arm's difference, power) and ``adequacy.py``'s (why a task cannot tell). Nothing
statistical is decided here: the rows carry Holm's reading. What failed runs mean for the verdict are typed notes (``Note``), which the
verdict carries (``Verdict.notes``) and honours: a recipe the reference could not choose (``recipe-unchosen``), a
difference between two kinds of failure (``failure-difference``), never a gain, and an arm whose validation was
still rising when its budget ended (``budget-short``). Their rules (docs/pipeline.md says them too):

- a run is *at chance* when its score is no higher than the best constant answer's (``collapse.chance_score``);
  a model is at chance on a task when most of its runs collapsed or its mean test score is at chance;
- the recipe search *failed* on a task when the reference's run at every searched rate collapsed on validation or
  scored at chance there; the rate is then the one ``recipe.choose`` takes (its rule, stated in advance: the best
  validation score among those failed runs, a tie to the lower rate), and the page says so;
- a comparison of an arm at chance with a reference most of whose runs collapsed is a failure-difference, whatever
  the floor says: the verdict leaves it out of what it judges (``judged``);
- an arm's validation is *still rising* on a task when, in a majority of its seeds with two or more validation
  evaluations, the kept (best) evaluation is the last one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from domainbert.finetune.recipe import choose
from domainbert.report.inputs import FinetuneRun, ResultCheck
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


NoteKind = Literal["recipe-unchosen", "failure-difference", "budget-short"]


@dataclass(frozen=True)
class RecipeSearch:
    """A task's finished rate search: the rates tried, those whose run failed on validation (collapsed or at
    chance) and the rate chosen (``recipe.choose``)."""

    task: str
    rates: tuple[float, ...]
    failed: tuple[float, ...]
    chosen: float

    @property
    def unchosen(self) -> bool:
        """Every searched rate failed: the reference could not choose the recipe."""
        return bool(self.rates) and set(self.failed) == set(self.rates)


def _failed_on_validation(result: Mapping[str, Any]) -> bool:
    if (result.get("collapse_validation") or {}).get("collapsed"):
        return True
    chance = result.get("chance_validation")
    return chance is not None and float(result["validation"][result["primary_metric"]]) <= float(chance)


def recipe_searches(state: Mapping[str, Mapping[float, Mapping[str, Any] | None]]) -> list[RecipeSearch]:
    """The finished searches of ``state`` (``recipe.search_state``: task -> rate -> the run's result); a task
    with a run still missing is left out."""
    out = []
    for task, results in state.items():
        done = {lr: r for lr, r in results.items() if r is not None}
        if not done or len(done) != len(results):
            continue
        failed = tuple(sorted(lr for lr, r in done.items() if _failed_on_validation(r)))
        out.append(RecipeSearch(task, tuple(sorted(done)), failed, choose({lr: dict(r) for lr, r in done.items()})))
    return out


@dataclass(frozen=True)
class Note:
    """One thing the verdict says of failed runs on ``task``: ``model`` (the arm; the reference for
    ``recipe-unchosen``) and ``reference``; ``seeds``: (seeds whose kept evaluation was the last, seeds with a
    history) for ``budget-short``; ``rates`` and ``chosen`` for ``recipe-unchosen``."""

    kind: NoteKind
    task: str
    model: str
    reference: str = ""
    seeds: tuple[int, int] = (0, 0)
    rates: tuple[float, ...] = ()
    chosen: float | None = None

    @property
    def sentence(self) -> str:
        if self.kind == "recipe-unchosen":
            rates = ", ".join(f"{lr:g}" for lr in self.rates)
            return (
                f"{self.task}: the recipe could not be chosen on the reference: {self.model}'s run collapsed or stayed "
                f"at chance on validation at every searched rate ({rates}), so the rate {self.chosen:g} was taken "
                "by the rule stated in advance (the best validation score among those failed runs, a tie to the "
                "lower rate); every model on this task ran at a rate no reference run showed to work."
            )
        if self.kind == "failure-difference":
            return (
                f"{self.task}: {self.model} - {self.reference} is a difference between kinds of failure, not a gain: "
                f"{self.reference}'s runs collapsed and {self.model} is at chance (no better than a constant "
                "answer), whatever the floor says."
            )
        k, n = self.seeds
        return (
            f"{self.task}: {self.model}'s validation was still rising at its last evaluation ({k} of {n} seeds kept "
            "their last evaluation as their best): its epoch budget may be short."
        )


def recipe_notes(searches: Sequence[RecipeSearch], reference: str = "base") -> list[Note]:
    """A ``recipe-unchosen`` note for each search in which every rate failed."""
    return [Note("recipe-unchosen", s.task, reference, rates=s.rates, chosen=s.chosen) for s in searches if s.unchosen]


def _row(scores: Sequence[ScoreRow], task: str, model: str) -> ScoreRow | None:
    return next((r for r in scores if (r.task, r.model) == (task, model)), None)


def at_chance(row: ScoreRow, runs: Sequence[FinetuneRun]) -> bool:
    """Most of the model's runs on the task collapsed, or its mean test score is no higher than the best constant
    answer's (the mean over its runs' test splits)."""
    if 2 * row.collapsed > row.n_seeds:
        return True
    levels = [c for r in runs if (r.task, r.model) == (row.task, row.model) and (c := r.chance) is not None]
    return bool(levels) and row.mean <= sum(levels) / len(levels)


def failure_notes(
    scores: Sequence[ScoreRow], comparisons: Sequence[Comparison], runs: Sequence[FinetuneRun]
) -> list[Note]:
    """A ``failure-difference`` note for each arm's comparison with a reference most of whose runs collapsed, the
    arm at chance."""
    out = []
    for c in comparisons:
        if c.diff is None or c.reference not in REFERENCES or c.model in (*REFERENCES, FLOOR_MODEL):
            continue
        ref, arm = _row(scores, c.task, c.reference), _row(scores, c.task, c.model)
        if ref is None or arm is None or 2 * ref.collapsed <= ref.n_seeds:
            continue
        if at_chance(arm, runs):
            out.append(Note("failure-difference", c.task, c.model, c.reference))
    return out


def rising_notes(runs: Sequence[FinetuneRun], arms: Sequence[str]) -> list[Note]:
    """A ``budget-short`` note for each arm and task where most seeds kept their last validation evaluation."""
    out = []
    for task in dict.fromkeys(r.task for r in runs):
        for arm in arms:
            kept = [r.kept_last for r in runs if (r.task, r.model) == (task, arm) and r.kept_last is not None]
            if kept and 2 * sum(kept) > len(kept):
                out.append(Note("budget-short", task, arm, seeds=(sum(kept), len(kept))))
    return out


def judged(comparisons: Sequence[Comparison], notes: Sequence[Note]) -> list[Comparison]:
    """``comparisons`` without the failure-differences among ``notes``: none of them can be a gain."""
    failed = {(n.task, n.model, n.reference) for n in notes if n.kind == "failure-difference"}
    return [c for c in comparisons if (c.task, c.model, c.reference) not in failed]


VerdictKind = Literal["gain", "uninformative", "withheld", "no-arm", "no-reference", "no-gain"]


@dataclass(frozen=True)
class Verdict:
    """The page's verdict: ``gain`` (``winners`` beat ``reference``, the better reference's name as the page says
    it), ``uninformative`` (no task can separate the arms), ``withheld`` (no arm has all its results),
    ``no-arm`` (no arm was fine-tuned), ``no-reference`` (no reference was; ``between``: the arms were compared
    with each other) or ``no-gain`` (``judged_complete``: some arms were left out as incomplete); ``notes``: what
    it says of failed runs (``failures.Note``), one sentence each after the line."""

    kind: VerdictKind
    reference: str
    winners: tuple[str, ...] = ()
    between: bool = False
    judged_complete: bool = False
    notes: tuple[Note, ...] = ()

    @property
    def note_lines(self) -> list[str]:
        """One sentence per note, in the order the notes were given."""
        return [n.sentence for n in self.notes]

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
    notes: Sequence[Note] = (),
) -> Verdict:
    """The verdict over ``arms`` and ``comparisons`` (those judged: on complete results and tasks that can
    separate the arms; ``uninformative``: the tasks that cannot, ``uninformative_tasks``; ``incomplete``: the
    models left out, ``incomplete_models``); ``notes`` (``failures.py``) go with it, and its failure-differences
    are left out of what is judged."""
    verdict = _decide(scores, judged(comparisons, notes), arms, uninformative, incomplete)
    return replace(verdict, notes=tuple(notes))


def _decide(
    scores: list[ScoreRow],
    comparisons: list[Comparison],
    arms: list[str],
    uninformative: Sequence[str],
    incomplete: list[str],
) -> Verdict:
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
