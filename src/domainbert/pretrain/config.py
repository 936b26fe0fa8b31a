"""Typed config of the pretraining stage (``base_model:`` and ``pretrain:`` in a domain YAML)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domainbert.schema import PathStr, StrictModel

Arm = Literal["continued", "extended", "scratch"]


class BaseModelConfig(StrictModel):
    """The general checkpoint: ``package:<module>`` (a model shipped in a Python package), a local folder or a hub id."""

    name_or_path: str
    lowercase: bool = True


class DeepSpeedConfig(StrictModel):
    enabled: bool = False
    zero_stage: Literal[0, 1, 2, 3] = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    config_file: PathStr | None = Field(None, description="A user's DeepSpeed JSON; replaces the generated one.")


class PretrainConfig(StrictModel):
    arms: list[Arm] = Field(min_length=1)
    budget_tokens: int = Field(ge=1, description="Tokens each arm trains on (equal budgets keep arms comparable).")
    max_steps: int | None = Field(None, ge=1, description="Cap on optimizer steps (tests and smoke runs).")
    seq_len: int = Field(128, ge=8)
    batch_size: int = Field(16, ge=1, description="Sequences per device per micro-step.")
    grad_accum: int = Field(1, ge=1)
    lr: float = Field(5e-4, gt=0)
    warmup_ratio: float = Field(0.06, ge=0, lt=1)
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    mask_rate: float = Field(0.15, gt=0, lt=1)
    whole_word_mask: bool = False
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    scratch_size: Literal["base_config", "tiny", "mini", "small", "medium", "base", "large"] = "base_config"
    checkpoint_every: int = Field(100, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    eval_documents: int = Field(200, ge=1, description="Held-out documents for domain and general perplexity.")
    general_eval_corpus: list[PathStr] = Field(default_factory=list, description="General text for forgetting (perplexity).")
    deepspeed: DeepSpeedConfig = DeepSpeedConfig()
    seed: int = 42
