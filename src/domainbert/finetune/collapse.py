"""Degenerate fine-tuning runs: (nearly) constant predictions, or a training loss that did not fall.

A run that predicts one class for every example, or no entity at all, scores a number that says nothing about
the encoder it started from; comparing it with another model reports the collapse as if it were an effect.
``diagnose`` looks at one split's predictions and the run's loss curve and returns a small verdict the stage
stores in ``result.json`` (``collapse``: ``collapsed``, ``reasons`` and the figures behind them). The stage
uses the VALIDATION diagnosis to decide on a retry (so the test set never steers training) and reports the
TEST diagnosis. This module does not retry anything and does not compare models.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

# A single class for at least this share of the examples is a collapse (unless gold is just as skewed).
CONSTANT_SHARE = 0.95
# Predicted entities below this share of the gold entities: the tagger has (nearly) stopped tagging.
MIN_ENTITY_SHARE = 0.05
# The training loss at the end must be below this share of the loss at the start.
LOSS_FALL = 0.9


def _entities(tags: list[str]) -> int:
    return sum(1 for t in tags if t.startswith("B-"))


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
        ``collapsed`` (bool), ``reasons`` (sentences), ``top_share`` (share of the most frequent prediction,
        classification) or ``entity_share`` (predicted / gold entities, NER), ``loss_start``, ``loss_end``.
    """
    reasons: list[str] = []
    out: dict[str, Any] = {"loss_start": loss_start, "loss_end": loss_end}
    if task_type == "ner":
        n_gold = sum(_entities(t) for t in gold)
        n_pred = sum(_entities(t) for t in pred)
        share = n_pred / n_gold if n_gold else 1.0
        out["entity_share"] = share
        if n_gold and share < MIN_ENTITY_SHARE:
            reasons.append(f"predicted {n_pred} entities for {n_gold} gold ones (nearly all 'O')")
    else:
        keys = [tuple(p) if multi_label else p for p in pred]
        gold_keys = [tuple(g) if multi_label else g for g in gold]
        top, count = Counter(keys).most_common(1)[0] if keys else (None, 0)
        share = count / len(keys) if keys else 0.0
        gold_share = Counter(gold_keys).most_common(1)[0][1] / len(gold_keys) if gold_keys else 0.0
        out["top_share"] = share
        if keys and share >= CONSTANT_SHARE and gold_share < CONSTANT_SHARE:
            reasons.append(
                f"predicted {top!r} for {share:.0%} of the examples (gold's most frequent answer: {gold_share:.0%})"
            )
    if loss_start is not None and loss_end is not None and loss_end > LOSS_FALL * loss_start:
        reasons.append(f"training loss did not fall ({loss_start:.3f} at the start, {loss_end:.3f} at the end)")
    out["collapsed"] = bool(reasons)
    out["reasons"] = reasons
    return out
