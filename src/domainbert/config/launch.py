"""Typed config of how pretraining's processes start (``pretrain.launch``) and of DeepSpeed
(``pretrain.deepspeed``).

It leaves out what the processes train (``pretrain.py``, ``schedules.py``) and the launch itself
(``pretrain/launch.py``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domainbert.config.schema import PathStr, StrictModel


class DeepSpeedConfig(StrictModel):
    """DeepSpeed settings; the JSON config is generated from these unless ``config_file`` is given."""

    enabled: bool = False
    """Train through DeepSpeed (its engine, ZeRO and checkpoints)."""
    zero_stage: Literal[0, 1, 2, 3] = 0
    """ZeRO stage: 0 none; 1 optimizer states, 2 and gradients, 3 and parameters sharded across ranks."""
    offload_optimizer: bool = False
    """Keep the optimizer states in CPU memory (ZeRO-Offload)."""
    offload_params: bool = False
    """Keep the parameters in CPU memory (ZeRO-3)."""
    config_file: PathStr | None = Field(None, description="A user's DeepSpeed JSON; replaces the generated one.")


class LaunchConfig(StrictModel):
    """How the training processes are started. ``none`` trains in the calling process (CPU demo default)."""

    launcher: Literal["none", "deepspeed", "torchrun"] = "none"
    """How the training processes start: none (in this process), torchrun or deepspeed."""
    num_processes: int = Field(1, ge=1, description="Processes (GPUs) per node.")
    num_nodes: int = Field(1, ge=1)
    """Machines taking part (from a hostfile or the scheduler's environment)."""
    hostfile: PathStr | None = Field(None, description="DeepSpeed hostfile for multi-node runs.")
    master_port: int = Field(29500, ge=1024, le=65535)
    """The rendezvous port of rank 0."""
