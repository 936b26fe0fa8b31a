"""Where an arm starts: the one answer to "which weights and tokenizer does this arm begin from?".

``continued`` starts from the base (or from the base with its warmed-up MLM head when the base has none),
``extended`` from the vocab stage's extended model (with the warmed head copied in), ``scratch`` from a
randomly initialised encoder over the domain tokenizer. ``arm_start`` resolves this once; ``load_arm`` loads
it. This module does not train and does not warm heads up (``head_warmup.py`` does).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from domainbert.core.errors import ModelError
from domainbert.core.models import load_mlm_model, load_tokenizer
from domainbert.pretrain.head_warmup import copy_warm_head, warm_model_folder
from domainbert.pretrain.model import load_pretraining_model, load_tokenizer_folder, scratch_config

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout


@dataclass(frozen=True)
class ArmStart:
    """An arm's starting point, resolved once (``arm_start``) and passed down to loading, fingerprints and cards.

    Attributes:
        arm: ``continued``, ``extended`` or ``scratch``.
        source: the model reference or folder its weights (scratch: its tokenizer) come from.
        warm_head: the finished head warm-up's model folder when the arm uses it (continued: it is the source;
            extended: its head is copied over the extended model's), else None.
        warmup_enabled: ``pretrain.head_warmup.enabled`` as configured, for ``head_origin``.
    """

    arm: str
    source: str
    warm_head: Path | None
    warmup_enabled: str

    @property
    def head_origin(self) -> str:
        """Where the arm's MLM head came from, so that the report knows whether "before" figures mean anything."""
        if self.arm == "scratch":
            return "random"
        if self.warm_head is not None:
            return "warmed-up"
        return "checkpoint" if self.warmup_enabled == "auto" else "checkpoint or random (warm-up off)"


def arm_start(cfg: DomainConfig, arm: str, layout: RunLayout) -> ArmStart:
    """Where ``arm`` starts from.

    Raises:
        ModelError: the vocab stage's output the arm needs is missing, or the arm is unknown.
    """
    warm = warm_model_folder(cfg, layout)
    enabled = cfg.pretrain.head_warmup.enabled
    if arm == "continued":
        # a base without its MLM head starts from the warmed-up head
        source = str(warm) if warm is not None else cfg.base_model.name_or_path
        return ArmStart(arm, source, warm, enabled)
    if arm == "extended":
        folder = Path(layout.extended_model)
        if not (folder / "config.json").is_file():
            raise ModelError(
                "extended model not found (run the vocab stage first: domainbert vocab DOMAIN)", file=folder
            )
        return ArmStart(arm, str(folder), warm, enabled)
    if arm == "scratch":
        folder = Path(layout.tokenizer)
        if not folder.is_dir():
            raise ModelError(
                "domain tokenizer not found (run the vocab stage first: domainbert vocab DOMAIN)", file=folder
            )
        return ArmStart(arm, str(folder), None, enabled)
    raise ModelError(f"unknown arm {arm!r}; arms are continued, extended, scratch", field="pretrain.arms")


def load_arm(cfg: DomainConfig, start: ArmStart) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(masked-LM model, tokenizer) of an arm's start, ready to train; SDPA attention where available."""
    from transformers import AutoModelForMaskedLM, AutoModelForPreTraining

    source, nsp = start.source, cfg.pretrain.next_sentence_prediction
    tokenizer = load_tokenizer_folder(source) if start.arm == "scratch" else load_tokenizer(source)
    if start.arm == "scratch":
        torch.manual_seed(cfg.pretrain.seed)
        config = scratch_config(cfg, tokenizer)
        config._attn_implementation = "sdpa"
        model = (AutoModelForPreTraining if nsp else AutoModelForMaskedLM).from_config(config)
    else:
        model = load_pretraining_model(source) if nsp else load_mlm_model(source)
    if start.arm == "extended" and start.warm_head is not None:
        copy_warm_head(model, start.warm_head, Path(source))
    with contextlib.suppress(Exception):
        model.set_attn_implementation("sdpa")
    # accepts_loss_kwargs lets transformers normalise the loss over the whole accumulated batch
    # (num_items_in_batch); off, the loss stays the micro-batch mean that the engine scales under accumulation.
    model.accepts_loss_kwargs = False
    return model, tokenizer
