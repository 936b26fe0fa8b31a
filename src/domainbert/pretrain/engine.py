"""Optimisation engines behind one protocol: plain PyTorch (single process, CPU or GPU) and DeepSpeed.

Both follow DeepSpeed's calling convention, so the trainer has one loop: ``backward(loss)`` and ``step()``
after every micro-batch; the optimizer (AdamW, the configured schedule, gradient clipping) steps only
at the end of each accumulation window. ``save(dir)``/``load(dir)`` write and read everything an exact resume
needs except the data position and RNG states (the trainer adds those). ``export_state_dict()`` gives the
full fp32 weights of the wrapped model (ZeRO-3 shards gathered) for the final Hugging Face folder.
This module does not know about data or metrics.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from domainbert.config.pretrain import PretrainConfig
from domainbert.config.start_from import StartFromConfig
from domainbert.core.optim import adamw, clipped_step, param_groups, schedule
from domainbert.pretrain.objective import MLMObjective

log = logging.getLogger(__name__)
EXTRAS_FILE = "objective_extras.safetensors"  # an objective's modules besides the Hugging Face model


class Engine(Protocol):
    module: nn.Module
    micro_steps: int

    def forward(self, *args: torch.Tensor | None, **kwargs: torch.Tensor | None) -> torch.Tensor: ...
    def backward(self, loss: torch.Tensor) -> None: ...
    def step(self) -> torch.Tensor | float | None: ...
    def current_lr(self) -> float: ...
    def save(self, folder: Path) -> None: ...
    def load(self, folder: Path) -> None: ...
    def export_state_dict(self) -> dict[str, torch.Tensor]: ...


def lr_scheduler(
    optimizer: torch.optim.Optimizer, pcfg: PretrainConfig, total_steps: int, start: StartFromConfig | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """The arm's schedule (``pretrain.lr_schedule``) after its warm-up of ``warmup_share`` of the steps.

    An arm started from another arm's checkpoint (``start``) with no re-warm-up continues the schedule from that
    step: its step ``i`` takes the factor of step ``start.step + i`` of a run of ``start.step + total_steps``
    steps, with no warm-up (a wsd arm from a pre-decay checkpoint starts at the peak); with ``rewarm`` it warms
    up afresh over its own steps, as a fresh arm does."""
    s = pcfg.lr_schedule
    if start is not None and not start.rewarm:
        offset = start.step
        whole = schedule(s.kind, 0, offset + total_steps, s.decay_fraction, s.decay_shape)
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: whole(offset + step))
    warmup = int(pcfg.warmup_share * total_steps)
    factor = schedule(s.kind, warmup, total_steps, s.decay_fraction, s.decay_shape)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class TorchEngine:
    """Single-process AdamW training with gradient accumulation.

    Args:
        module: the ``MLMObjective`` to train.
        pcfg: the ``PretrainConfig``.
        total_steps: optimizer steps of the run (for the schedule).
    """

    def __init__(
        self, module: nn.Module, pcfg: PretrainConfig, total_steps: int, start: StartFromConfig | None = None
    ) -> None:
        self.module = module
        self.accum = pcfg.grad_accum
        self.max_grad_norm = pcfg.max_grad_norm
        self.optimizer = adamw(
            param_groups(module, pcfg.weight_decay), lr=pcfg.peak_lr, betas=pcfg.adam_betas, eps=pcfg.adam_eps
        )
        self.scheduler = lr_scheduler(self.optimizer, pcfg, total_steps, start)
        self.micro_steps = 0
        self.scaler = (
            torch.amp.GradScaler("cuda") if (pcfg.precision == "fp16" and torch.cuda.is_available()) else None
        )

    def forward(self, *args: torch.Tensor | None, **kwargs: torch.Tensor | None) -> torch.Tensor:
        return self.module(*args, **kwargs)

    def backward(self, loss: torch.Tensor) -> None:
        scaled = loss / self.accum
        (self.scaler.scale(scaled) if self.scaler else scaled).backward()

    def step(self) -> torch.Tensor | None:
        """Count a micro-step; at an accumulation boundary clip, step and return the gradient norm (a tensor on
        the device, unread: the trainer reads it at a logging step)."""
        self.micro_steps += 1
        if self.micro_steps % self.accum:
            return None
        return clipped_step(
            self.optimizer, self.scheduler, self.module.parameters(), self.max_grad_norm, self.scaler
        ).detach()

    def current_lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def save(self, folder: Path) -> None:
        import torch.distributed as dist
        from safetensors.torch import save_model

        if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
            return  # DDP replicas are identical: rank 0 writes, every rank reads
        folder.mkdir(parents=True, exist_ok=True)
        # The Hugging Face model's own key names (handles tied weights): the checkpoint folder, with the config
        # and tokenizer the trainer writes beside it, loads with from_pretrained.
        save_model(self.hf_model(), str(folder / "model.safetensors"))
        extras = objective_of(self).extras()
        if extras is not None:  # e.g. replaced-token detection's generator and head
            save_model(extras, str(folder / EXTRAS_FILE))
        torch.save(
            {
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "micro_steps": self.micro_steps,
                "scaler": self.scaler.state_dict() if self.scaler else None,
            },
            folder / "optimizer.pt",
        )

    def load(self, folder: Path) -> None:
        from safetensors import SafetensorError
        from safetensors.torch import load_file, load_model

        from domainbert.core.safeload import CheckpointError, safe_torch_load

        # Both files are read before anything is applied: a bad file leaves the engine untouched.
        extras = objective_of(self).extras()
        parts = [(self.hf_model(), folder / "model.safetensors")]
        if extras is not None:
            parts.append((extras, folder / EXTRAS_FILE))
        for _, path in parts:
            try:
                load_file(str(path))
            except (SafetensorError, OSError) as exc:
                raise CheckpointError(f"cannot read (truncated or corrupt): {exc}", file=path) from None
        state = safe_torch_load(folder / "optimizer.pt")
        for module, path in parts:
            try:
                load_model(module, str(path))  # handles the tied weights save_model wrote once
            except RuntimeError as exc:
                raise CheckpointError(f"weights do not fit the model: {str(exc).splitlines()[0]}", file=path) from None
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.micro_steps = state["micro_steps"]
        if self.scaler and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])

    def export_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.module.state_dict().items()}

    def hf_model(self) -> nn.Module:
        """The Hugging Face model inside the objective (under a DDP wrapper when there is one)."""
        module = self.module
        while not hasattr(module, "head_attr") and hasattr(module, "module"):
            module = module.get_submodule("module")
        return module.get_submodule("model")


class DeepSpeedEngine:
    """DeepSpeed (ZeRO 0-3, CPU offload) behind the same protocol; DeepSpeed does the accumulation.

    Args:
        module: the ``MLMObjective`` to train.
        ds_config: the DeepSpeed JSON config as a dict (``ds_config.build_ds_config``).
        pcfg: the ``PretrainConfig`` (schedule and optimizer settings).
        total_steps: optimizer steps of the run.
    """

    def __init__(
        self,
        module: nn.Module,
        ds_config: dict[str, Any],
        pcfg: PretrainConfig,
        total_steps: int,
        start: StartFromConfig | None = None,
    ) -> None:
        from domainbert.core.extras import require

        deepspeed = require("deepspeed", "deepspeed", "pretrain.deepspeed.enabled")

        self.ds_config = ds_config
        offload = ds_config.get("zero_optimization", {}).get("offload_optimizer", {}).get("device") == "cpu"
        if offload:  # ZeRO-Offload needs DeepSpeed's CPU Adam (a C++ op compiled on first use)
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            optimizer = DeepSpeedCPUAdam(
                param_groups(module, pcfg.weight_decay),
                lr=pcfg.peak_lr,
                betas=pcfg.adam_betas,
                eps=pcfg.adam_eps,
                adamw_mode=True,
            )
        else:
            optimizer = torch.optim.AdamW(
                param_groups(module, pcfg.weight_decay), lr=pcfg.peak_lr, betas=pcfg.adam_betas, eps=pcfg.adam_eps
            )
        scheduler = lr_scheduler(optimizer, pcfg, total_steps, start)
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=module, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config
        )
        self.module = self.engine.module
        self.micro_steps = 0

    def forward(self, *args: torch.Tensor | None, **kwargs: torch.Tensor | None) -> torch.Tensor:
        return self.engine(*args, **kwargs)

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss)

    def step(self) -> torch.Tensor | float | None:
        """DeepSpeed's step; at a boundary its global gradient norm as DeepSpeed keeps it, unread here. DeepSpeed's
        own step may still read the device (its fp16 overflow check, a norm it keeps as a float): out of our hands."""
        boundary = self.engine.is_gradient_accumulation_boundary()
        self.engine.step()
        self.micro_steps += 1
        if not boundary:
            return None
        norm = self.engine.get_global_grad_norm()
        return norm.detach() if isinstance(norm, torch.Tensor) else norm

    def current_lr(self) -> float:
        return float(self.engine.get_lr()[0])

    def save(self, folder: Path) -> None:
        # Every rank calls this: DeepSpeed writes each rank's shard of the optimizer (and ZeRO-3 weights).
        self.engine.save_checkpoint(str(folder), tag="ds", client_state={"micro_steps": self.micro_steps})

    def load(self, folder: Path) -> None:
        from domainbert.core.safeload import vet_folder

        vet_folder(folder)  # DeepSpeed unpickles its files in full: refuse any beyond its own classes
        _, client = self.engine.load_checkpoint(str(folder), tag="ds")
        self.micro_steps = int((client or {}).get("micro_steps", 0))

    def export_state_dict(self) -> dict[str, torch.Tensor]:
        """Full fp32 weights on every rank (ZeRO-3 partitions gathered)."""
        if self.engine.zero_optimization_stage() == 3:
            import deepspeed

            params = list(self.module.parameters())
            with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
                return {k: v.detach().cpu().clone() for k, v in self.module.state_dict().items()}
        return {k: v.detach().cpu().clone() for k, v in self.module.state_dict().items()}


def describe(engine: Engine) -> str:
    if isinstance(engine, DeepSpeedEngine):
        return "deepspeed " + json.dumps(engine.ds_config.get("zero_optimization", {}), sort_keys=True)
    return "torch"


def objective_of(engine: Engine | TorchEngine) -> MLMObjective:
    """The ``MLMObjective`` inside an engine's module (under a DDP wrapper when there is one)."""
    module: object = engine.module
    while not isinstance(module, MLMObjective):
        inner = getattr(module, "module", None)  # a wrapper (DDP) holds the objective as ``module``
        if not isinstance(inner, nn.Module):
            break
        module = inner
    if not isinstance(module, MLMObjective):
        raise TypeError(f"the engine trains {type(module).__name__}, not an MLMObjective")
    return module


def build_engine(
    objective: MLMObjective, pcfg: PretrainConfig, total_steps: int, world: int, start: StartFromConfig | None = None
) -> Engine:
    """DeepSpeed when ``pretrain.deepspeed.enabled``; else PyTorch, under DDP when there are several ranks."""
    if pcfg.deepspeed.enabled:
        from domainbert.pretrain.ds_config import build_ds_config

        ds_config = build_ds_config(
            pcfg, world, total_steps=total_steps, hidden_size=objective.model.config.hidden_size
        )
        return DeepSpeedEngine(objective, ds_config, pcfg, total_steps, start)
    # An objective with extras leaves the arm's own MLM head unused: DDP must not wait for its gradients.
    unused = objective.extras() is not None
    wrapped: nn.Module = (
        torch.nn.parallel.DistributedDataParallel(objective, find_unused_parameters=unused) if world > 1 else objective
    )
    return TorchEngine(wrapped, pcfg, total_steps, start)
