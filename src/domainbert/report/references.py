"""The verdict's references and power: which model an arm must beat, what the base warm-up cost, what the
equal-token control says about the domain, and whether the design could see the gains it looks for.

An arm counts as a gain on a task only when it beats the better of the two references (``base``, the warmed-up
base, and ``original``, the checkpoint before the warm-up; ``results.best_reference``), under the page's
family-wise correction. ``control`` trained the same tokens from the same start on general text, so each corpus
arm's difference from it is the domain's own effect. The detectable difference of each comparison
(``rows.holm_adjusted``) is set against the gains the literature reports. Sentences only: the statistics are
``results.py``'s and ``power.py``'s.
"""

from __future__ import annotations

from domainbert.config.pretrain import ARMS
from domainbert.literature import PUBLISHED_GAINS, PUBLISHED_GAINS_SOURCE
from domainbert.report.power import WHOLE_SCALE
from domainbert.report.results import BASE_MODEL, ORIGINAL_MODEL, best_reference
from domainbert.report.rows import Comparison, ScoreRow
from domainbert.report.summary import ci_text, holm_text, metric_label, pairing_text, points, signed_points
from domainbert.report.verdict import against_best_reference, arm_tally, between_arms, comparison_of

CONTROL = "control"


def difference(row: Comparison) -> str:
    """``-1.2 F1 (95% CI -3.0 to +0.6)``, with Holm's reading where it changed the interval's."""
    return f"{signed_points(row.diff)} {metric_label(row.metric)} ({ci_text(row)}{holm_text(row)})"


def arm_verdicts(scores: list[ScoreRow], comparisons: list[Comparison], arms: list[str]) -> list[str]:
    """One sentence per arm: against the better reference of each task, better / worse / no difference."""
    out = []
    for arm in arms:
        tally = arm_tally(scores, comparisons, arm)
        if not sum(len(v) for v in tally.values()):
            continue
        parts = []
        for verdict, word in (("better", "beat"), ("worse", "was worse than")):
            for c in tally[verdict]:
                parts.append(
                    f"{word} {c.reference} on {c.task} by {signed_points(c.diff)} {metric_label(c.metric)} "
                    f"({ci_text(c)})" + (" although a collapsed run is involved" if c.collapsed else "")
                )
        same = tally["no significant difference"]
        if same:
            parts.append(
                "did not differ significantly from the better reference on "
                + ", ".join(
                    f"{c.task} ({c.reference}: {signed_points(c.diff)}, {ci_text(c)}{holm_text(c)})"
                    + (" (collapsed runs involved)" if c.collapsed else "")
                    for c in same
                )
            )
        out.append(f"{arm}: " + "; ".join(parts) + ".")
    return out


def references_row(comparisons: list[Comparison], task: str) -> Comparison | None:
    """The two references' own comparison on ``task`` (base - original: what the warm-up did), if both ran."""
    return comparison_of(comparisons, task, BASE_MODEL, ORIGINAL_MODEL)


def reference_sentences(scores: list[ScoreRow], comparisons: list[Comparison]) -> list[str]:
    """Which reference each task's verdict uses, and what the base warm-up cost the encoder (base - original)."""
    out = []
    for task in dict.fromkeys(r.task for r in scores):
        row = references_row(comparisons, task)
        if row is None:
            continue
        ref = best_reference(scores, task)
        reading = {"worse": "a measured cost", "better": "a measured gain"}.get(row.verdict, "not significant")
        out.append(
            f"{task}: the general warm-up changed the encoder's score by {difference(row)} (base - original: "
            f"{reading}); the verdict's reference is the better of the two, {ref}."
        )
    return out


def control_sentences(scores: list[ScoreRow], comparisons: list[Comparison], arms: list[str]) -> list[str]:
    """Each corpus arm's domain effect: the arm against the control (same start, same tokens, general text)."""
    out = []
    for arm in arms:
        for task in dict.fromkeys(r.task for r in scores):
            row = comparison_of(comparisons, task, arm, CONTROL)
            if row is None:
                continue
            reading = {"better": "the domain's text helped", "worse": "general text did better"}.get(
                row.verdict, "no significant domain effect"
            )
            out.append(
                f"Domain effect of {arm} on {task} ({arm} - control, the same tokens of general text): "
                f"{difference(row)}: {reading}."
            )
    return out


def scratch_sentences(comparisons: list[Comparison], arms: list[str]) -> list[str]:
    """Further-pretrained or from scratch? Continued against each from-scratch arm on every task where both
    ran (the page's own comparison, paired and Holm-corrected), when the run trained both."""
    scratch = [a for a in arms if a in ARMS and ARMS[a].from_scratch]
    out = []
    for other in scratch if "continued" in arms else []:
        for row in (c for c in comparisons if (c.model, c.reference) == ("continued", other)):
            if row.diff is None:
                continue
            reading = {"better": "continued pretraining did better", "worse": f"{other} did better"}.get(
                row.verdict, "no significant difference"
            )
            out.append(
                f"Further-pretrained or from scratch on {row.task} (continued - {other}): {difference(row)}: "
                f"{reading}."
            )
    return out


def power_sentences(scores: list[ScoreRow], comparisons: list[Comparison], arms: list[str]) -> list[str]:
    """Per task, the smallest difference the arms' comparisons with the reference could detect (where no arm ran
    on a task, the references' own comparison, the same seeds paired: the task's noise, measured; where no
    reference ran, the comparisons between arms); when it exceeds the gains the literature reports, the design
    cannot answer the question it asks."""
    out = []
    low, high = PUBLISHED_GAINS
    for task in dict.fromkeys(r.task for r in scores):
        rows = [c for a in arms for c in against_best_reference(scores, comparisons, a) if c.task == task]
        found = [c.detectable for c in rows if c.detectable is not None]
        refs = references_row(comparisons, task)
        if not found and refs is not None and refs.detectable is not None:
            out.append(
                f"{task}: no arm was compared here; the references' own comparison (base - original"
                f"{pairing_text(refs)}) detects {points(refs.detectable)} points with 80% power over the page's "
                f"{refs.comparisons} comparisons: the task's own noise at this design (an arm that starts "
                "from base may move with it more closely)."
            )
            continue
        if not found:
            out += _between_arms(task, comparisons, arms)
            continue
        # the page's one figure is the least favourable comparison of an arm with its reference, not the best
        weakest = max((c for c in rows if c.detectable is not None), key=lambda c: c.detectable or 0.0)
        smallest = weakest.detectable or 0.0
        if smallest >= WHOLE_SCALE:
            out.append(_nothing_detectable(task, rows[0].comparisons, smallest))
            continue
        text = (
            f"{task}: the smallest difference an arm's comparison with the reference detects with 80% power, "
            f"over the page's {rows[0].comparisons} comparisons, is {points(smallest)} points"
        )
        if len(found) > 1:
            each = ", ".join(f"{c.model} {points(c.detectable)}" for c in rows if c.detectable is not None)
            text += f" for the least favourable arm, {weakest.model} (each arm: {each})"
        spread = weakest.family.detectable_range if weakest.family is not None else None
        if spread is not None:
            design = weakest.design
            name = {"seed": "seeds", "replicate": "replicates"}.get(
                (design.pairing if design else None) or "", "units"
            )
            given = f"{design.units} {name}'" if design is not None and design.units else "the run's own"
            top = points(spread[1]) if spread[1] < WHOLE_SCALE else "past the metric's whole range"
            text += f"; {points(spread[0])} to {top} given {given} spread (95%)"
        if smallest > high:
            text += (
                f", more than {PUBLISHED_GAINS_SOURCE} ({points(low)} to {points(high)} points): this design cannot "
                "answer whether adaptation helped; more seeds or a larger test split would"
            )
        out.append(text + ".")
    return out


def _nothing_detectable(task: str, family: int, smallest: float) -> str:
    # a detectable difference past the metric's whole range says only "nothing", not a size
    return (
        f"{task}: no difference this metric can show is detectable with 80% power over the page's {family} "
        f"comparisons (the design's smallest detectable difference, {points(smallest)} points, is more than the "
        "metric's whole range): the runs' scores vary too much between seeds for this design to answer anything; "
        "more seeds or a larger test split would."
    )


def _between_arms(task: str, comparisons: list[Comparison], arms: list[str]) -> list[str]:
    """Where no reference ran (a from-scratch study: scratch against continued), the power of the comparisons the
    page made between its arms: their detectable differences, each with its pairing."""
    rows = [(c, d) for c in between_arms(comparisons, arms) if c.task == task and (d := c.detectable) is not None]
    if not rows:
        return []
    smallest = min(d for _, d in rows)
    if smallest >= WHOLE_SCALE:
        return [_nothing_detectable(task, rows[0][0].comparisons, smallest)]
    # one row: "(continued - scratch, paired over 5 seeds, r -0.61)"; several: each with its own figure
    each = "; ".join(
        f"{c.model} - {c.reference}{'' if len(rows) == 1 else ' ' + points(d)}, "
        f"{pairing_text(c).removeprefix('; ') or 'unpaired'}"
        for c, d in rows
    )
    return [
        f"{task}: no reference was fine-tuned here; the smallest difference the page's comparisons between arms "
        f"detect with 80% power, over its {rows[0][0].comparisons} comparisons, is {points(smallest)} points "
        f"({each})."
    ]


def seed_warning(scores: list[ScoreRow], configured: int = 0) -> list[str]:
    """Models with fewer than 3 seeds' results: missing runs when the configuration asks for more (say which),
    else too few seeds configured for the intervals to separate anything worth a claim."""
    few = [r for r in scores if r.model != "floor" and r.n_seeds < 3]
    missing = sorted({f"{r.model} on {r.task} ({r.n_seeds} of {configured})" for r in few if r.n_seeds < configured})
    short = sorted({r.model for r in few if r.n_seeds >= configured})
    out = []
    if missing:
        out.append(
            f"Runs missing: {'; '.join(missing)} seeds have results, so their intervals cannot separate anything "
            "yet; rerun the fine-tuning stage (finished runs are skipped) before reading them."
        )
    if short:
        out.append(
            f"Fewer than 3 seeds for {', '.join(short)}: with so few runs the seed variance is barely estimated and "
            "the intervals cannot separate anything; give finetune.seeds at least 3 values."
        )
    return out
