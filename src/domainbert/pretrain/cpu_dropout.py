"""Dropout with cheaper random masks for training on a CPU.

PyTorch's CPU dropout draws one Bernoulli sample per element from its generator; with a small encoder,
drawing masks is a large share of a bf16 training step. Here one 64-bit draw (``random_`` over the full int64 range) gives four 16-bit lanes, and
an element is kept when its lane is at or above a threshold: four times fewer generator calls. The keep
probability is quantised to 1/65536 (p = 0.1 becomes 6554/65536 = 0.100006), and kept values are scaled by
the inverse of that exact probability, so the expectation is unchanged. Masks come from torch's default
generator, so seeded runs and resumed runs (which restore its state) repeat exactly.

``install(model)`` swaps every ``nn.Dropout`` of the model for ``LaneDropout`` and registers an attention
function (transformers' eager attention with this dropout on the attention probabilities) under
``ATTENTION``; the caller switches the model to it. It changes nothing on other devices.
"""

from __future__ import annotations

import torch
from torch import nn

ATTENTION = "domainbert_cpu_eager"
_LANES = 65536


def lane_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``nn.functional.dropout(x, p, training)`` with masks from 16-bit lanes of 64-bit draws."""
    if not training or p <= 0:
        return x
    if p >= 1:
        return x * 0
    drop = round(p * _LANES)  # lanes below this are dropped
    n = x.numel()
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
    lanes = draws.view(torch.int16)[:n].view(x.shape)
    mask = (lanes >= drop - _LANES // 2).to(x.dtype) * (_LANES / (_LANES - drop))
    return x * mask


class LaneDropout(nn.Dropout):
    """``nn.Dropout`` drawing its masks with ``lane_dropout``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lane_dropout(x, self.p, self.training)


def lane_dropout_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' eager attention (BERT family), with ``lane_dropout`` on the attention probabilities."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = nn.functional.softmax(weights, dim=-1)
    weights = lane_dropout(weights, dropout, module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


def install(model: nn.Module) -> int:
    """Swap the model's ``nn.Dropout`` modules for ``LaneDropout`` and register ``ATTENTION``; returns the
    number of modules swapped."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, lane_dropout_attention)
    swapped = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                setattr(parent, name, LaneDropout(child.p, child.inplace))
                swapped += 1
    return swapped
