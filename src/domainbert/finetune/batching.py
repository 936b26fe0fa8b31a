"""Batches for fine-tuning and prediction: length-grouped batches of training examples, padded per batch, and
the logits of a list of examples in their input order.

- Batches: each epoch, a seeded permutation of the training examples is cut into windows of
  ``batch_size * length_group_size`` examples; each window is sorted by length and cut into batches, and the
  batches are shuffled (the scheme of transformers' ``group_by_length``). The lengths are given by the caller
  and are tokenizer-independent (words per example), so every model sees the SAME batches in the SAME order
  for a given seed; differences between models come from the models.
- Padding: each batch is padded to its own longest sequence (dynamic padding).

The training loop that consumes the batches (optimisation, early stopping) is ``trainer.py``'s; turning logits
into a task's answers is the task modules' (``ner.py``, ``classification.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def to_device(batch: dict[str, torch.Tensor], dev: torch.device) -> dict[str, torch.Tensor]:
    return batch if dev.type == "cpu" else {k: v.to(dev, non_blocking=True) for k, v in batch.items()}


def length_grouped_batches(
    lengths: list[int], batch_size: int, group_size: int, rng: np.random.Generator
) -> list[list[int]]:
    """One epoch of batches of example indices, grouped by length within shuffled windows (see the module doc)."""
    order = rng.permutation(len(lengths))
    window = batch_size * group_size
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window].tolist(), key=lambda i: -lengths[i])  # stable sort
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def collate(features: list[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad a batch to its longest sequence: ids with ``pad_id``, masks and type ids with 0, token labels -100."""
    width = max(len(f["input_ids"]) for f in features)
    batch: dict[str, torch.Tensor] = {}
    pads = {"input_ids": pad_id, "attention_mask": 0, "token_type_ids": 0}
    for key, pad in pads.items():
        if key in features[0]:
            batch[key] = torch.tensor([f[key] + [pad] * (width - len(f[key])) for f in features], dtype=torch.long)
    labels = [f["labels"] for f in features]
    if isinstance(labels[0], list) and labels[0] and isinstance(labels[0][0], float):
        batch["labels"] = torch.tensor(labels, dtype=torch.float)  # multi-hot (multi-label classification)
    elif isinstance(labels[0], list):
        batch["labels"] = torch.tensor([row + [-100] * (width - len(row)) for row in labels], dtype=torch.long)
    else:
        batch["labels"] = torch.tensor(labels, dtype=torch.long)
    return batch


def predict_logits(
    model: torch.nn.Module,
    features: list[dict[str, Any]],
    batch_size: int,
    pad_id: int,
    dtype: torch.dtype | None = None,
    *,
    inference_mode: bool = True,
    length_sorted: bool = True,
) -> list[np.ndarray]:
    """Logits per example (``[seq_len, labels]`` for tokens, ``[labels]`` for sequences), in input order, on
    the model's device under autocast to ``dtype`` (None: fp32).

    ``length_sorted``: examples are batched by length (sorted) so that padding is small, and the order of the
    output is restored; off, they are batched in input order. ``inference_mode``: the forward passes run under
    ``torch.inference_mode`` (no autograd bookkeeping at all), off under ``torch.no_grad``. Neither changes a
    logit beyond float rounding: padded positions are masked out of attention
    (tests/stage/finetune/test_finetune_eval_levers.py states the tolerance).
    """
    model.eval()
    dev = next(model.parameters()).device
    order = list(range(len(features)))
    if length_sorted:
        order.sort(key=lambda i: len(features[i]["input_ids"]))
    out: list[np.ndarray | None] = [None] * len(features)
    no_autograd = torch.inference_mode if inference_mode else torch.no_grad
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = collate([features[i] for i in idx], pad_id)
        batch.pop("labels")
        with no_autograd(), torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(**to_device(batch, dev)).logits.float().cpu().numpy()
        for row, i in zip(logits, idx, strict=True):
            out[i] = row[: len(features[i]["input_ids"])] if row.ndim == 2 else row
    return out  # type: ignore[return-value]
