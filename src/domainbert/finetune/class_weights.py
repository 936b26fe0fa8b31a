"""Class weights for the fine-tuning loss (``finetune.tasks[].class_weights: balanced``).

A macro average counts a class of 2 test examples as much as one of 90; a plain cross-entropy barely sees the
first, so a run can leave it out and lose its share of the score. ``balanced_weights`` weighs each label by
n / (k * n_label) over the training labels (scikit-learn's "balanced", the floor's own option), and
``weighted_loss`` is the cross-entropy the loop then optimises. Which examples are trained on and how the
model is scored are not changed here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F


def balanced_weights(train: list[dict[str, Any]], num_labels: int) -> tuple[float, ...]:
    """Per label, n / (k * n_label) over the training labels (scikit-learn's "balanced"; a token classifier's
    scored tokens, -100 left out); a label absent from training weighs 1."""
    counts = np.zeros(num_labels)
    for feature in train:
        labels = np.atleast_1d(np.asarray(feature["labels"]))
        counts += np.bincount(labels[labels >= 0], minlength=num_labels)[:num_labels]
    present = counts > 0
    weights = np.ones(num_labels)
    weights[present] = counts.sum() / (present.sum() * counts[present])
    return tuple(float(w) for w in weights)


def weighted_loss(net: Any, batch: dict[str, torch.Tensor], weights: tuple[float, ...]) -> torch.Tensor:
    """Cross-entropy with a weight per label, over every scored position (-100: not scored), normalised by the
    weights summed as PyTorch's weighted mean is."""
    labels = batch["labels"]
    logits = net(**{k: v for k, v in batch.items() if k != "labels"}).logits
    weight = torch.tensor(weights, dtype=torch.float32, device=logits.device)
    flat = logits.reshape(-1, logits.shape[-1]).float()
    return F.cross_entropy(flat, labels.reshape(-1), weight=weight, ignore_index=-100)
