"""The forward pass of a mean-pooling sequence classifier: masked mean of the encoder's last hidden states,
dropout, one linear layer, and the loss when labels are given.

One function for the training class (``pooling.MeanPoolClassifier``) and the saved Hugging Face class
(``modeling_mean_pool``), so a saved model computes the logits it was trained and scored with. It imports
only torch: it is copied into every saved mean-pooling model folder beside ``modeling_mean_pool.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def pool_and_classify(
    model: Any,
    multi_label: bool,
    input_ids: Any,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    labels: torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(loss or None, logits) of a module with ``encoder``, ``dropout`` and ``classifier``: the forward pass
    shared with the training class (``pooling.MeanPoolClassifier``), so the saved model computes its logits."""
    extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
    hidden = model.encoder(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
    mask = (attention_mask if attention_mask is not None else torch.ones_like(input_ids)).unsqueeze(-1)
    mask = mask.to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
    logits = model.classifier(model.dropout(pooled))
    loss = None
    if labels is not None:
        if multi_label:
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        else:
            loss = nn.functional.cross_entropy(logits, labels)
    return loss, logits
