"""Degenerate fine-tuning runs: (nearly) constant predictions, or a training loss that did not fall.

A run that predicts one class for every example, answers distributed far from gold's, no entity at all, or an
entity on (nearly) every token or sentence scores a number that says nothing about
the encoder it started from; comparing it with another model reports the collapse as if it were an effect.
``diagnose`` looks at one split's predictions and the run's loss curve and returns a small verdict the stage
stores in ``result.json`` (``collapse``: ``collapsed``, ``reasons`` and the figures behind them). The stage
uses the VALIDATION diagnosis to decide on a retry (so the test set never steers training) and reports the
TEST diagnosis. ``kept_attempt`` says which of a run's two attempts the stage keeps, from validation alone; ``chance_score`` is
the score of the best constant answer, the level a run "at chance" does not pass. This module does not retry
anything and does not compare models.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

# A single class for at least this share of the examples is a collapse (unless gold is just as skewed).
CONSTANT_SHARE = 0.95
# Predicted labels this far from gold's distribution (total variation distance) are a collapse, whichever way.
MAX_LABEL_DISTANCE = 0.6
# Predicted entities below this share of the gold entities: the tagger has (nearly) stopped tagging.
MIN_ENTITY_SHARE = 0.05
# Predicted entities above this multiple of the gold entities: the tagger tags (nearly) everything.
MAX_ENTITY_RATIO = 3.0
# Tokens tagged as part of an entity: at least this share, where gold tags under half of that, is a collapse.
MAX_TAGGED_SHARE = 0.8
# Sentences (of 3 words or more) tagged as entity from first word to last: at least this share, where gold has
# at most a fifth of it, is a collapse (the I-after-O repair turns "every word I-X" into such one-span sentences).
MAX_WHOLE_SPANS = 0.5
# The training loss at the end must be below this share of the loss at the start.
LOSS_FALL = 0.9


def _entities(tags: list[str]) -> int:
    """Entities of a tag sequence as seqeval's strict IOB2 reading counts them after the I-after-O repair."""
    count, previous = 0, "O"
    for tag in tags:
        if tag.startswith("B-") or (tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:])):
            count += 1
        previous = tag
    return count


def _tagged(sentences: list[list[str]]) -> tuple[float, float]:
    """(share of tokens inside an entity, share of sentences of 3+ words tagged from first word to last)."""
    tokens = sum(len(s) for s in sentences)
    tagged = sum(1 for s in sentences for tag in s if tag != "O")
    long = [s for s in sentences if len(s) >= 3]
    whole = sum(1 for s in long if all(tag != "O" for tag in s))
    return (tagged / tokens if tokens else 0.0), (whole / len(long) if long else 0.0)


def _ner_reasons(gold: list[list[str]], pred: list[list[str]], out: dict[str, Any]) -> list[str]:
    """Degenerate taggers both ways: (nearly) no entity, or an entity on (nearly) every token or sentence.

    Judged on which tokens are tagged and how many entities the tags make, both the same before and after the
    repair of ill-formed ``I-`` tags, so no repair can make a degenerate run look healthy."""
    reasons = []
    n_gold, n_pred = sum(_entities(t) for t in gold), sum(_entities(t) for t in pred)
    share = n_pred / n_gold if n_gold else 1.0
    tagged_pred, whole_pred = _tagged(pred)
    tagged_gold, whole_gold = _tagged(gold)
    out.update(
        {
            "entity_share": share,
            "tagged_share": tagged_pred,
            "gold_tagged_share": tagged_gold,
            "whole_sentence_spans": whole_pred,
            "gold_whole_sentence_spans": whole_gold,
        }
    )
    if n_gold and share < MIN_ENTITY_SHARE:
        reasons.append(f"predicted {n_pred} entities for {n_gold} gold ones (nearly all 'O')")
    if n_gold and share > MAX_ENTITY_RATIO:
        reasons.append(f"predicted {n_pred} entities for {n_gold} gold ones (an entity on nearly every token)")
    if tagged_pred >= MAX_TAGGED_SHARE and tagged_gold < tagged_pred / 2:
        reasons.append(f"tagged {tagged_pred:.0%} of the tokens as entities (gold: {tagged_gold:.0%})")
    if whole_pred >= MAX_WHOLE_SPANS and whole_gold <= whole_pred / 5:
        reasons.append(
            f"one entity spans the whole sentence in {whole_pred:.0%} of the sentences (gold: {whole_gold:.0%})"
        )
    return reasons


def _distribution_distance(gold: list[Any], pred: list[Any]) -> float:
    """Total variation distance between the predicted and the gold answer distributions (0 equal, 1 disjoint)."""
    g, p = Counter(gold), Counter(pred)
    return 0.5 * sum(abs(g[k] / len(gold) - p[k] / len(pred)) for k in set(g) | set(p)) if gold and pred else 0.0


def _classification_reasons(gold: list[Any], pred: list[Any], multi_label: bool, out: dict[str, Any]) -> list[str]:
    """One answer for (nearly) every example, or answers distributed far from gold's."""
    reasons = []
    keys = [tuple(p) if multi_label else p for p in pred]
    gold_keys = [tuple(g) if multi_label else g for g in gold]
    top, count = Counter(keys).most_common(1)[0] if keys else (None, 0)
    share = count / len(keys) if keys else 0.0
    gold_share = Counter(gold_keys).most_common(1)[0][1] / len(gold_keys) if gold_keys else 0.0
    distance = _distribution_distance(gold_keys, keys)
    out.update({"top_share": share, "label_distance": distance})
    if keys and share >= CONSTANT_SHARE and gold_share < CONSTANT_SHARE:
        reasons.append(
            f"predicted {top!r} for {share:.0%} of the examples (gold's most frequent answer: {gold_share:.0%})"
        )
    elif distance >= MAX_LABEL_DISTANCE:
        reasons.append(f"predicted answers distributed far from gold's (total variation distance {distance:.2f})")
    return reasons


def diagnose(
    task_type: str,
    gold: list[Any],
    pred: list[Any],
    loss_start: float | None = None,
    loss_end: float | None = None,
    multi_label: bool = False,
) -> dict[str, Any]:
    """Whether a run collapsed, and why.

    Args:
        task_type: ``ner`` or ``classification``.
        gold: gold answers (IOB2 tag lists, a label, or sorted label lists for multi-label).
        pred: predictions in the same form.
        loss_start: mean training loss over the first steps (None: not checked).
        loss_end: mean training loss over the last steps.
        multi_label: classification answers are label lists.

    Returns:
        ``collapsed`` (bool), ``reasons`` (sentences), the figures behind them (classification: ``top_share``,
        ``label_distance``; NER: ``entity_share`` (predicted / gold entities), ``tagged_share`` and
        ``whole_sentence_spans`` with their gold counterparts), ``loss_start``, ``loss_end``.
    """
    out: dict[str, Any] = {"loss_start": loss_start, "loss_end": loss_end}
    if task_type == "ner":
        reasons = _ner_reasons(gold, pred, out)
    else:
        reasons = _classification_reasons(gold, pred, multi_label, out)
    if loss_start is not None and loss_end is not None and loss_end > LOSS_FALL * loss_start:
        reasons.append(f"training loss did not fall ({loss_start:.3f} at the start, {loss_end:.3f} at the end)")
    out["collapsed"] = bool(reasons)
    out["reasons"] = reasons
    return out


def kept_attempt(first: dict[str, Any], retry: dict[str, Any], metric: str) -> str:
    """``first`` or ``retry``: the attempt a run keeps after a retry, decided on validation alone.

    An attempt whose validation predictions did not collapse wins; between two that both collapsed (or neither),
    the higher validation ``metric`` wins, and a tie keeps the retry. A retry is no cure by itself: on a task the
    encoder cannot read (a model at chance) the first attempt's loss may not fall while its predictions stay
    mixed, and the retry's higher rate can push it to one class, a worse run (studies/00-positive-control.md).

    Args:
        first, retry: each attempt's ``collapse_validation`` and ``validation`` scores, as ``run_finetune`` returns.
        metric: the task's primary metric.
    """

    def rank(attempt: dict[str, Any]) -> tuple[bool, float]:
        return (not attempt["collapse_validation"]["collapsed"], float(attempt["validation"][metric]))

    return "first" if rank(first) > rank(retry) else "retry"


def chance_score(task_type: str, gold: list[Any], metric: str, multi_label: bool = False) -> float | None:
    """The primary ``metric`` of the best constant answer on ``gold``: one label for every example (its macro-F1 or
    accuracy), or no entity for NER (F1 0); a run that scores no more knows nothing the input told it. None for
    multi-label tasks (no one constant answer stands for chance there) and empty splits."""
    if task_type == "ner":
        return 0.0
    if multi_label or not gold:
        return None
    from domainbert.finetune.classification import classification_metrics

    labels = sorted({str(g) for g in gold})
    answers = [str(g) for g in gold]
    return max(
        float(classification_metrics(answers, [label] * len(answers), labels, False)[metric]) for label in labels
    )
