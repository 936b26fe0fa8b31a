"""The one optimizer and learning-rate schedule set-up of pretraining and fine-tuning.

AdamW without weight decay on biases and normalisation weights (BERT's recipe), the fused kernel where torch
has one for the parameters' device, and the learning-rate schedules as ``LambdaLR`` factors (their state is a
plain dict, and a factor depends on the step alone, so a resumed run follows the same curve): a linear warmup
then linear decay to zero (BERT, RoBERTa and transformers' ``get_linear_schedule_with_warmup``), warmup-stable-
decay with a linear, cosine or 1-sqrt decay (the trapezoid ModernBERT trains with), and warmup then constant.
DeepSpeed's CPU Adam takes the same parameter groups (``pretrain/engine.py``). This module trains nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Trainable parameters in two groups: decayed, and biases and normalisation weights (no decay)."""
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "norm" in name.lower() else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def linear_schedule(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """``LambdaLR`` factor: 0 -> 1 over ``warmup_steps``, then linearly to 0 at ``total_steps``."""

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def warmup_stable_decay(
    warmup_steps: int, total_steps: int, decay_fraction: float, shape: str = "linear"
) -> Callable[[int], float]:
    """``LambdaLR`` factor of warmup-stable-decay: 0 -> 1 over ``warmup_steps`` (as ``linear_schedule``), the peak
    until the last ``decay_fraction`` of the steps, then down to 0 at ``total_steps`` along ``shape``: ``linear``,
    ``cosine`` (half a cosine) or ``1-sqrt`` (one minus the square root of the decay's progress)."""
    decay_steps = max(1, round(decay_fraction * total_steps))
    decay_start = max(warmup_steps, total_steps - decay_steps)  # a decay longer than the run after warm-up
    span = max(1, total_steps - decay_start)
    fall = DECAY_SHAPES[shape]

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        if step < decay_start:
            return 1.0
        return max(0.0, fall(min(1.0, (step - decay_start) / span)))

    return factor


# The decay's factor at progress p in [0, 1] (1 at its start, 0 at its end).
DECAY_SHAPES: dict[str, Callable[[float], float]] = {
    "linear": lambda p: 1.0 - p,
    "cosine": lambda p: 0.5 * (1.0 + math.cos(math.pi * p)),
    "1-sqrt": lambda p: 1.0 - math.sqrt(p),
}


def warmup_constant(warmup_steps: int) -> Callable[[int], float]:
    """``LambdaLR`` factor: 0 -> 1 over ``warmup_steps``, then the peak."""
    return lambda step: min(1.0, (step + 1) / max(1, warmup_steps))


def schedule(
    kind: str, warmup_steps: int, total_steps: int, decay_fraction: float = 0.1, shape: str = "linear"
) -> Callable[[int], float]:
    """The factor of schedule ``kind``: ``linear`` (``linear_schedule``), ``wsd`` (``warmup_stable_decay``) or
    ``constant`` (``warmup_constant``)."""
    if kind == "linear":
        return linear_schedule(warmup_steps, total_steps)
    if kind == "wsd":
        return warmup_stable_decay(warmup_steps, total_steps, decay_fraction, shape)
    if kind == "constant":
        return warmup_constant(warmup_steps)
    raise ValueError(f"unknown learning-rate schedule {kind!r}")


def adamw(
    groups: list[dict[str, Any]], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
) -> torch.optim.Optimizer:
    """AdamW with the fused kernel (CPU and CUDA), or the default one where torch has no fused kernel."""
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def linear_warmup_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, linear_schedule(warmup_steps, total_steps))


def linear_warmup_constant(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A linear warmup to the peak, then the peak: for training that stops when its curve flattens (a decaying
    rate would flatten the curve by itself)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_constant(warmup_steps))


def clipped_step(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    params: Iterable[torch.Tensor],
    max_norm: float,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """The end of an optimizer step: unscale (fp16), clip the gradient norm, step the optimizer and the
    schedule, clear the gradients. Returns the norm before clipping."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return norm
