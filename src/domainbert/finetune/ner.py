"""NER as token classification: sub-token label alignment, decoding back to words, seqeval metrics.

Alignment: each word's tag goes to its FIRST sub-token; the other sub-tokens, the special tokens and padding
get -100 (ignored by the loss). Decoding reads the prediction at each word's first sub-token. Words cut off by
``max_length`` (or that tokenise to nothing) are predicted ``O``, so predictions always have the gold length
and the evaluation is over the full gold sentences.

Metrics are seqeval's, in strict IOB2 mode (an entity counts only when its type and both boundaries match):
micro precision/recall/F1, macro F1 and a per-type table. A predicted ``I-X`` that does not continue an
``X`` entity is repaired to ``B-X`` at decoding, by the rule the gold tags were repaired with when read
(``tags.to_iob2``), so gold and predictions are judged alike. ``ner_metrics`` calls seqeval on the word-level tag lists exactly as a user
would, so its numbers are seqeval's numbers.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from domainbert.task_data.splits import NerExample
from domainbert.task_data.tag_schemes import to_iob2

log = logging.getLogger(__name__)

IGNORE = -100


def encode_ner(
    examples: list[NerExample], tokenizer: Any, label2id: dict[str, int], max_length: int
) -> list[dict[str, Any]]:
    """Tokenise pre-split words and align the word tags to the first sub-token of each word.

    Args:
        examples: sentences (IOB2 tags).
        tokenizer: a fast Hugging Face tokenizer (``word_ids()`` is needed).
        label2id: IOB2 tag -> class index.
        max_length: truncation length in sub-tokens, special tokens included.

    Returns:
        One feature dict per sentence: ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when the
        tokenizer makes them), ``labels`` (-100 off first sub-tokens), ``first_positions`` (the sub-token
        index of each kept word, in word order; words cut off are absent) and ``cut`` (whether any were).
    """
    enc = tokenizer([ex.tokens for ex in examples], is_split_into_words=True, truncation=True, max_length=max_length)
    features = []
    for i, ex in enumerate(examples):
        word_ids = enc.word_ids(i)
        labels = [IGNORE] * len(word_ids)
        first: dict[int, int] = {}
        for pos, wid in enumerate(word_ids):
            if wid is not None and wid not in first:
                first[wid] = pos
                labels[pos] = label2id[ex.tags[wid]]
        feat = {k: enc[k][i] for k in enc.keys()}
        feat["labels"] = labels
        feat["first_positions"] = [first[w] for w in sorted(first)]
        feat["word_index"] = sorted(first)
        feat["cut"] = len(first) < len(ex.tokens)  # words past max_length are never read (nor predicted)
        features.append(feat)
    return features


def decode_ner(
    logits: list[np.ndarray],
    features: list[dict[str, Any]],
    examples: list[NerExample],
    id2label: list[str],
    repairs: list[int] | None = None,
) -> list[list[str]]:
    """Word-level IOB2 predictions from per-sentence token logits (each ``[seq, labels]``), ill-formed
    ``I-`` tags repaired (and added to ``repairs[0]`` when given)."""
    out = []
    repairs = repairs if repairs is not None else [0]
    before = repairs[0]
    for sent_logits, feat, ex in zip(logits, features, examples, strict=True):
        row = sent_logits.argmax(-1)
        tags = ["O"] * len(ex.tokens)
        for wid, pos in zip(feat["word_index"], feat["first_positions"], strict=True):
            tags[wid] = id2label[int(row[pos])]
        out.append(to_iob2(tags, "IOB2", repairs))
    if repairs[0] > before:
        log.debug("%d predicted 'I-X' tags not continuing an X entity repaired to 'B-X'", repairs[0] - before)
    return out


def repair_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per NER task: the predicted ``I-X`` tags its runs' test answers had repaired to ``B-X`` (each
    run's count is in its result, ``predicted_repairs``; the per-run lines are DEBUG, ``--verbose``)."""
    by_task: dict[str, list[tuple[int, str]]] = {}
    for r in results:
        if r.get("predicted_repairs") is not None:
            by_task.setdefault(r["task"], []).append((int(r["predicted_repairs"]), f"{r['model']}/seed-{r['seed']}"))
    lines = []
    for task, counts in by_task.items():
        most, where = max(counts)
        total = sum(n for n, _ in counts)
        lines.append(
            f"{task}: {total:,} predicted 'I-X' tags not continuing an X entity repaired to 'B-X' over {len(counts)} "
            f"run(s)' test answers (most: {most:,}, {where})"
        )
    return lines


def ner_metrics(gold: list[list[str]], pred: list[list[str]]) -> dict[str, Any]:
    """seqeval strict IOB2 metrics: micro precision/recall/F1, macro F1 and per-type P/R/F1/support.

    One ``classification_report`` holds all of them (its ``micro avg`` and ``macro avg`` rows are what
    ``f1_score`` and friends return): each seqeval call extracts every entity again, and a run scores its
    validation split once an epoch."""
    from seqeval.metrics import classification_report
    from seqeval.scheme import IOB2

    report = classification_report(gold, pred, output_dict=True, mode="strict", scheme=IOB2, zero_division=0)
    per_type = {
        k: {
            "precision": float(v["precision"]),
            "recall": float(v["recall"]),
            "f1": float(v["f1-score"]),
            "support": int(v["support"]),
        }
        for k, v in report.items()
        if not k.endswith(" avg")
    }
    micro, macro = report["micro avg"], report["macro avg"]
    return {
        "f1": float(micro["f1-score"]),
        "precision": float(micro["precision"]),
        "recall": float(micro["recall"]),
        "macro_f1": float(macro["f1-score"]),
        "per_type": per_type,
    }
