"""``class_weights: balanced``: the weights are scikit-learn's "balanced" ones (sequence labels and a token
classifier's scored tokens), the weighted loss is PyTorch's weighted cross-entropy over the model's logits, and
with every weight 1 it is exactly the model's own loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.utils.class_weight import compute_class_weight

from domainbert.config.finetune import TaskConfig
from domainbert.finetune.class_weights import balanced_weights, weighted_loss
from support.finetune import tiny_classifier


def test_sequence_weights_are_scikit_learns_balanced_ones():
    labels = [0] * 7 + [1] * 2 + [2]
    expected = compute_class_weight("balanced", classes=np.array([0, 1, 2]), y=labels)
    assert balanced_weights([{"labels": y} for y in labels], 3) == pytest.approx(tuple(expected))


def test_token_weights_count_scored_tokens_only_and_an_absent_label_weighs_one():
    train = [{"labels": [-100, 0, 0, 1, -100]}, {"labels": [0, 0, 0, 1, -100, -100]}]
    # 5 O and 2 B over 2 present labels: O 7/(2*5), B 7/(2*2); I (label 2) never seen in training
    assert balanced_weights(train, 3) == pytest.approx((0.7, 1.75, 1.0))


def test_the_weighted_loss_with_unit_weights_is_the_models_own_and_weights_move_it():
    model = tiny_classifier().eval()
    batch = {
        "input_ids": torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "labels": torch.tensor([0, 1]),
    }
    with torch.no_grad():
        own = model(**batch).loss
        assert torch.allclose(weighted_loss(model, batch, (1.0, 1.0)), own)
        per_example = torch.nn.functional.cross_entropy(
            model(**{k: v for k, v in batch.items() if k != "labels"}).logits, batch["labels"], reduction="none"
        )
        expected = (1.0 * per_example[0] + 3.0 * per_example[1]) / 4.0
        assert torch.allclose(weighted_loss(model, batch, (1.0, 3.0)), expected)


def test_class_weights_are_refused_for_a_multi_label_task():
    with pytest.raises(ValueError, match="class_weights"):
        TaskConfig(
            name="t", type="classification", format="jsonl", path="x", labels=["a", "b"], multi_label=True,
            class_weights="balanced",
        )
