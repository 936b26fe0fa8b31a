"""Typed config of fine-tuning and comparison (``finetune:`` and ``compare:`` in a domain YAML)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from domainbert.schema import PathStr, StrictModel


class TaskConfig(StrictModel):
    """One labelled task. ``path`` is a folder with train/validation/test files, or a hub dataset id."""

    name: str
    type: Literal["ner", "classification"]
    format: Literal["conll", "jsonl", "csv", "hf"]
    path: PathStr
    labels: list[str] = Field(min_length=1, description="The label set; a label outside it is an error.")
    tag_scheme: Literal["IOB1", "IOB2", "BIOES"] = "IOB2"
    text_field: str = "text"
    text_pair_field: str | None = None
    label_field: str = "label"
    multi_label: bool = False
    max_train_examples: int | None = Field(None, ge=1)
    max_eval_examples: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _ner_needs_conll_or_hf(self) -> TaskConfig:
        if self.type == "ner" and self.format not in ("conll", "hf"):
            raise ValueError("an 'ner' task needs format 'conll' or 'hf'")
        return self


class FinetuneConfig(StrictModel):
    tasks: list[TaskConfig] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    epochs: float = Field(3, gt=0)
    lr: float = Field(5e-5, gt=0)
    batch_size: int = Field(16, ge=1)
    max_length: int = Field(128, ge=8)
    early_stopping_patience: int = Field(2, ge=1)
    mode: Literal["finetune", "frozen"] = "finetune"
    extra_models: dict[str, str] = Field(default_factory=dict, description="More models to compare: name -> hub id or folder.")


class CompareConfig(StrictModel):
    bootstrap_samples: int = Field(1000, ge=100)
    confidence: float = Field(0.95, gt=0.5, lt=1)
