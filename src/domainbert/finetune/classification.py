"""Sequence classification: encoding one text or a text pair, decoding predictions, and the metrics.

Single-label: cross-entropy over the label set; prediction = argmax; metrics macro-F1 and accuracy.
Multi-label: one sigmoid per label (transformers' ``multi_label_classification`` problem type); a label is
predicted when its probability exceeds 0.5; metrics micro-F1, macro-F1 and subset accuracy (all labels of an
example right). Metrics are scikit-learn's as a user would call them: single-label macro-F1 averages over the
labels present in gold or predictions (scikit-learn's default); multi-label averages over every label column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbert.task_data.splits import ClsExample


def encode_classification(
    examples: list[ClsExample],
    tokenizer: Any,
    label2id: dict[str, int],
    max_length: int,
    multi_label: bool,
    chunks: int = 1,
) -> list[dict[str, Any]]:
    """Tokenise texts (and pairs, truncating the longer first) and attach integer or multi-hot labels.

    With ``chunks`` above 1 (single texts), an example holds up to that many windows of ``max_length`` tokens,
    each with its own special tokens, one after the other: every window but the last is exactly ``max_length``
    long, so ``pool_forward`` can cut them apart again at multiples of it. A single text's feature also says
    whether its windows left part of it unread (``cut``: what ``runner.cut_by_window`` counts); a pair's does
    not (the tokenizer gives no overflow for a pair cut longest-first)."""
    texts = [ex.text for ex in examples]
    pairs = [ex.text_pair or "" for ex in examples] if any(ex.text_pair is not None for ex in examples) else None
    if pairs is None:
        rows: list[dict[str, Any]] = _chunked(tokenizer, texts, max_length, chunks)
    else:
        enc = tokenizer(texts, pairs, truncation=True, max_length=max_length)
        rows = [{k: enc[k][i] for k in enc.keys()} for i in range(len(texts))]
    features = []
    for ex, row in zip(examples, rows, strict=True):
        feat: dict[str, Any] = dict(row)
        if multi_label:
            vec = [0.0] * len(label2id)
            for label in ex.labels:
                vec[label2id[label]] = 1.0
            feat["labels"] = vec
        else:
            feat["labels"] = label2id[ex.labels[0]]
        features.append(feat)
    return features


def _chunked(tokenizer: Any, texts: list[str], max_length: int, chunks: int) -> list[dict[str, Any]]:
    """Per text, its first ``chunks`` windows of ``max_length`` tokens, concatenated (the tokenizer's overflow;
    one window is plain truncation), and ``cut``: whether the text had more windows than that."""
    enc = tokenizer(texts, truncation=True, max_length=max_length, return_overflowing_tokens=True, stride=0)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
    rows: list[dict[str, Any]] = [{k: [] for k in keys} for _ in texts]
    taken = [0] * len(texts)
    for j, i in enumerate(enc["overflow_to_sample_mapping"]):
        if taken[i] < chunks:
            for k in keys:
                rows[i][k] += enc[k][j]
        taken[i] += 1
    for row, windows in zip(rows, taken, strict=True):
        row["cut"] = windows > chunks
    return rows


def decode_classification(logits: np.ndarray, id2label: list[str], multi_label: bool) -> list[Any]:
    """A label per example, or a sorted label list per example for multi-label."""
    if multi_label:
        return [[id2label[j] for j in np.flatnonzero(row > 0.0)] for row in logits]  # sigmoid(x) > 0.5 <=> x > 0
    return [id2label[int(j)] for j in logits.argmax(-1)]


def classification_metrics(gold: list[Any], pred: list[Any], labels: list[str], multi_label: bool) -> dict[str, Any]:
    """macro-F1 and accuracy; for multi-label also micro-F1 (accuracy is then subset accuracy)."""
    from sklearn.metrics import accuracy_score, f1_score

    if multi_label:
        index = {label: j for j, label in enumerate(labels)}

        def hot(rows: list[list[str]]) -> np.ndarray:
            m = np.zeros((len(rows), len(labels)), dtype=int)
            for i, row in enumerate(rows):
                for label in row:
                    m[i, index[label]] = 1
            return m

        g, p = hot(gold), hot(pred)
        return {
            "macro_f1": float(f1_score(g, p, average="macro", zero_division=0)),
            "micro_f1": float(f1_score(g, p, average="micro", zero_division=0)),
            "accuracy": float(accuracy_score(g, p)),
        }
    return {
        "macro_f1": float(f1_score(gold, pred, average="macro", zero_division=0)),
        "accuracy": float(accuracy_score(gold, pred)),
    }
