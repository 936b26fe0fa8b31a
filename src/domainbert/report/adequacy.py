"""Whether a task can separate the arms at the run's fine-tuning budget.

Two ways a task says nothing about pretraining, whatever the intervals show:

* underfit: every model's mean sits under the floor (a bag-of-words or CRF baseline trained on the same
  examples). Fine-tuning has not learned what the floor learned; differences between the arms are then
  differences in how badly they underfit. Recommended: more training examples, more epochs, or a larger
  learning rate (the results say which the task had, and the longest run's updates); where runs stopped early
  on validation, the sentence counts them and names ``finetune.min_steps`` and the patience first (a metric
  that rises slowly and unevenly, such as macro-F1 over rare classes, stops a short patience on a plateau:
  studies/08-r8-heldout.md); where the encoder's window left at least ``CUT_SHARE`` of the test examples partly
  unread (``cut_by_window``, as the run recorded it), a longer window is named with that count, since the floor
  reads every word (studies/floor-window.md).
* saturated: the floor already reaches ``verdict.CEILING`` or every model is within ``verdict.NEAR_CEILING`` of
  a perfect score. No arm can do measurably better.

Which tasks are uninformative, and why, is decided on the score rows by ``verdict.uninformative_tasks`` (the
verdict reads it); ``task_adequacy`` returns a sentence per uninformative task; the headline leaves those tasks out of the
verdict and of the bold "best", and prints the sentence instead. Nothing statistical is decided here.
"""

from __future__ import annotations

from collections.abc import Sequence

from domainbert.report.inputs import FinetuneRun, Record
from domainbert.report.results import FLOOR_MODEL
from domainbert.report.rows import ScoreRow
from domainbert.report.summary import points
from domainbert.report.verdict import NEAR_CEILING, uninformative_tasks

CUT_SHARE = 0.25  # from a quarter of the test examples cut short, the window is named as a remedy


def _budget(task: str, results: list[FinetuneRun]) -> str:
    """What the task's models trained on: examples, epochs and learning rate, from their results."""
    run = next((r for r in results if r.task == task and r.model != FLOOR_MODEL), None)
    if run is None:
        return ""
    examples = run.train_examples
    runs = [r for r in results if r.task == task and r.model != FLOOR_MODEL and r.steps]
    updates = max(
        (r.steps for r in runs if r.steps), default=None
    )  # the longest run's: early stopping ends others sooner
    parts = [
        f"{examples:,} training examples" if examples else None,
        f"at most {updates:,} updates" if updates else None,
        f"lr {run.lr:g}" if run.lr else None,
    ]
    return " (" + ", ".join(p for p in parts if p) + ")" if any(parts) else ""


def _floor_kind(task: str, results: list[FinetuneRun]) -> str:
    """What the task's floor is, in a few words, from its result's task type ("the floor" when unknown)."""
    floor = next((r for r in results if r.task == task and r.model == FLOOR_MODEL), None)
    kind = str((floor.task_type if floor else None) or "")
    # a CRF reads capitals, affixes and word shapes; an uncased encoder sees none of the first
    return {"ner": "a CRF over word, affix and shape features", "classification": "a bag of words"}.get(
        kind, "the floor"
    )


def _window(runs: list[FinetuneRun]) -> str | None:
    """A longer window, where a run recorded that the encoder's left ``CUT_SHARE`` or more of the test examples
    partly unread: the run that cut most (models on other vocabularies cut a text into other counts of
    sub-tokens)."""
    cut = [(r, r.window) for r in runs if r.window is not None]
    if not cut:
        return None
    recorded, window = max(cut, key=lambda pair: pair[1].test)
    total = recorded.test_examples
    if not total or window.test < CUT_SHARE * total:
        return None
    reads = f"{window.max_length} sub-tokens" + (f" x {window.chunks} windows" if window.chunks > 1 else "")
    how = "finetune.max_length" if recorded.task_type == "ner" else "finetune.max_length, or more `chunks`"
    return (
        f"a longer window ({how}), since {window.test:,} of {total:,} test examples are longer than the "
        f"{reads} the encoder reads, and the floor reads them whole"
    )


def _remedies(task: str, results: list[FinetuneRun]) -> str:
    """What may make an underfit task informative, as a list: first, where early stopping ended runs before
    their last epoch, a floor of updates and a longer patience, with the count of such runs; last, where the
    encoder's window left many test examples partly unread, a longer one."""
    runs = [r for r in results if r.task == task and r.model != FLOOR_MODEL]
    stopped = sum(r.stopped_early for r in runs)
    out = ["more training examples or epochs", "a larger learning rate"]
    window = _window(runs)
    if window:
        out.append(window)
    if stopped:
        out.insert(
            0,
            "more updates before early stopping may end a run (finetune.min_steps) or a longer patience "
            f"(finetune.early_stopping_patience), since {stopped} of {len(runs)} runs stopped early on validation "
            "before their last epoch",
        )
    return "; ".join(f"({i}) {text}" for i, text in enumerate(out, 1))


def task_adequacy(scores: list[ScoreRow], results: Sequence[FinetuneRun | Record]) -> dict[str, str]:
    """Task -> why it cannot separate the arms at this fine-tuning budget (informative tasks are absent): the
    sentence of each of ``verdict.uninformative_tasks``."""
    runs = [FinetuneRun.of(r) for r in results]
    out: dict[str, str] = {}
    for task, why in uninformative_tasks(scores).items():
        if why.kind == "floor-saturated" and why.floor is not None:
            out[task] = (
                f"{task} cannot separate the arms: the floor already scores {points(why.floor.mean)}, so the task "
                "is saturated; a harder task (or one with less lexical overlap between its splits) would tell more."
            )
        elif why.kind == "saturated":
            out[task] = (
                f"{task} cannot separate the arms: every model scores at least {points(NEAR_CEILING)}, so the task "
                "is saturated; a harder task would tell more."
            )
        elif why.floor is not None:
            best, floor = why.best, why.floor
            out[task] = (
                f"{task} cannot separate the arms at this fine-tuning budget{_budget(task, runs)}: every model "
                f"is under the floor (best {best.model} {points(best.mean)} against {points(floor.mean)}), "
                f"so fine-tuning has not learned what {_floor_kind(task, runs)} learns from the same examples. "
                f"What may make it informative: {_remedies(task, runs)}."
            )
    return out
