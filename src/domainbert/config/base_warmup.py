"""Typed config of the base warm-up (``pretrain.base_warmup:`` in a domain YAML): how a checkpoint without its
masked-LM head becomes the masked-LM every comparison starts from, and how gently its encoder is moved."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from domainbert.config.schema import PathStr, StrictModel


class BaseWarmupConfig(StrictModel):
    """Making the base a masked-language model before any checkpoint-based arm (general-domain text).

    A checkpoint saved without its MLM head (sentence-embedding models such as all-MiniLM) gets a random head:
    its "before" perplexity is meaningless and the first steps of continued pretraining would mostly train
    that head. ``train: full`` runs the general masked-LM pretraining the literature starts from (the whole
    model, as RoBERTa is the base of "Don't Stop Pretraining"); ``train: head`` trains the head alone on a
    frozen encoder. The warmed-up model is the ``base`` of every comparison and the start of the
    checkpoint-based arms; it is cached once per machine (``core.paths.machine_cache``), so every domain with
    the same base, text and settings reuses it.
    """

    enabled: Literal["auto", "on", "off"] = Field(
        "auto", description="auto: only when the base checkpoint has no MLM head; on: always; off: never."
    )

    @field_validator("enabled", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: object) -> object:
        """YAML reads a bare ``on``/``off`` (and ``enabled=off`` on the command line) as a boolean."""
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    train: Literal["full", "head"] = Field(
        "full",
        description="full: the whole model (encoder unfrozen), the general masked-LM pretraining the arms build "
        "on; head: the MLM head alone on the frozen encoder (cheaper; the encoder keeps what it was).",
    )
    steps: int = Field(
        400,
        ge=1,
        description="Most optimizer steps (batch_size x seq_len tokens each): the warm-up stops earlier "
        "once general-text perplexity stops falling.",
    )
    eval_every: int = Field(20, ge=1, description="Steps between the general-text evaluations that decide the stop.")
    min_improvement: float = Field(
        0.02,
        ge=0,
        lt=1,
        description="Stop when general-text perplexity fell by less than this share since the "
        "last evaluation (converged).",
    )
    lr: float | None = Field(
        None, gt=0, description="Peak learning rate; None: 5e-4 for the full model, 2e-3 for the head alone."
    )
    encoder_lr_scale: float = Field(
        0.1,
        gt=0,
        le=1,
        description="train: full: the encoder's learning rate as a share of lr (the MLM head keeps lr), so the "
        "head learns fast while the encoder moves little (a discriminative rate, ULMFiT). At 1 the warm-up cost "
        "the offline encoder 8.2 points on science-subject; at 0.1 nothing measurable (studies/warmup-cost.md).",
    )
    l2sp: float = Field(
        0.0,
        ge=0,
        description="train: full: weight alpha of an L2-SP penalty, alpha / 2 x the squared distance of the "
        "encoder's weights from the checkpoint's, summed (Li et al. 2018); 0: none.",
    )
    corpus: list[PathStr] = Field(
        default_factory=list,
        description="General-domain JSONL(.gz) globs; empty: the vocab stage's control corpus "
        "less the files of pretrain.general_eval_corpus (so forgetting is measured on unseen text).",
    )
    max_documents: int = Field(
        200000,
        ge=1,
        description="Documents read from the warm-up corpus (the shipped glosses file holds fewer: all of it, "
        "so the warm-up does not cycle over a small share of it).",
    )
    # The warm-up's own shape, not the arms': every domain on a machine then shares one warmed-up base.
    batch_size: int = Field(16, ge=1, description="Sequences per step.")
    seq_len: int = Field(128, ge=8, description="Tokens per sequence.")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="Autocast precision; auto: bf16 where the hardware computes it natively, else fp32."
    )

    @property
    def peak_lr(self) -> float:
        """The learning rate the warm-up trains with (``lr``, else the default of its ``train`` mode)."""
        return self.lr if self.lr is not None else (5e-4 if self.train == "full" else 2e-3)
