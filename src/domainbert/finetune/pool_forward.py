"""The forward pass of a mean-pooling sequence classifier: masked mean of the encoder's last hidden states,
dropout, one linear layer, and the loss when labels are given.

One function for the training class (``pooling.MeanPoolClassifier``) and the saved Hugging Face class
(``modeling_mean_pool``), so a saved model computes the logits it was trained and scored with. With the model's
``chunk_length`` set (chunk and pool), each window of a long text is encoded on its own and all are pooled.
It imports only torch: it is copied into every saved mean-pooling model folder beside ``modeling_mean_pool.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _encode(model: Any, input_ids: Any, mask: torch.Tensor, token_type_ids: torch.Tensor | None) -> Any:
    """Last hidden states and the mask they pool under. With ``model.chunk_length`` set (chunk and pool), a row
    longer than it holds several windows of that length: each is encoded on its own (its own positions and
    attention), windows of padding alone are skipped, and the states are put back in the row's order."""
    chunk = getattr(model, "chunk_length", None)
    extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
    if not chunk or input_ids.shape[1] <= chunk:
        return model.encoder(input_ids=input_ids, attention_mask=mask, **extra).last_hidden_state, mask
    pad = -input_ids.shape[1] % chunk
    ids, mask = (nn.functional.pad(t, (0, pad)).reshape(-1, chunk) for t in (input_ids, mask))
    extra = {k: nn.functional.pad(v, (0, pad)).reshape(-1, chunk) for k, v in extra.items()}
    keep = mask.bool().any(1)
    states = model.encoder(input_ids=ids[keep], attention_mask=mask[keep], **{k: v[keep] for k, v in extra.items()})
    part = states.last_hidden_state
    hidden = part.new_zeros((ids.shape[0], chunk, part.shape[-1]))
    hidden[keep] = part
    rows = input_ids.shape[0]
    return hidden.reshape(rows, -1, part.shape[-1]), mask.reshape(rows, -1)


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
    mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
    hidden, mask = _encode(model, input_ids, mask, token_type_ids)
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
    logits = model.classifier(model.dropout(pooled))
    loss = None
    if labels is not None:
        if multi_label:
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        else:
            loss = nn.functional.cross_entropy(logits, labels)
    return loss, logits
