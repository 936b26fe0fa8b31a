"""Where an arm starts: the one answer to "which weights and tokenizer does this arm begin from?".

Each arm's ``ArmKind.start`` (``config.pretrain.ARMS``) says where: ``base`` (continued, tapt, curated-tapt)
is the base, or the warmed-up base when the base has no MLM head; ``extended`` is the vocab stage's extended
model (after a warm-up, the warmed base extended the same way: its new tokens' rows set as ``vocab.init``
says); ``continued`` (dapt-tapt) is the continued arm's result; ``random`` (scratch, self-pretrain) is a
randomly initialised encoder over the domain tokenizer. An arm named in ``pretrain.start_from`` starts instead
from a kept checkpoint of an earlier arm (its weights; the optimizer's moments start afresh). ``arm_start``
resolves this once; ``load_arm`` loads it. This module does not train and does not warm heads up (``base_warmup.py`` does).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from domainbert.config.pretrain import ARMS
from domainbert.config.start_from import StartFromConfig, start_of
from domainbert.core.errors import ConfigError, ModelError
from domainbert.core.models import load_mlm_model, load_tokenizer
from domainbert.core.safeload import CheckpointError
from domainbert.pretrain.base_warmup import warm_model_folder
from domainbert.pretrain.checkpoint import list_checkpoints, verify_checkpoint
from domainbert.pretrain.model import (
    can_switch_attention,
    load_pretraining_model,
    load_tokenizer_folder,
    scratch_config,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout


@dataclass(frozen=True)
class ArmStart:
    """An arm's starting point, resolved once (``arm_start``) and passed down to loading, fingerprints and cards.

    Attributes:
        arm: one of ``config.pretrain.ARMS``.
        source: the model reference or folder its weights (scratch: its tokenizer) come from.
        warm_head: the finished base warm-up's model folder when the arm uses it (continued: it is the source;
            extended: it is extended by the vocab stage's new tokens), else None.
        warmup_enabled: ``pretrain.base_warmup.enabled`` as configured, for ``head_origin``.
    """

    arm: str
    source: str
    warm_head: Path | None
    warmup_enabled: str
    checkpoint: StartFromConfig | None = None  # pretrain.start_from: source is that arm's checkpoint folder

    @property
    def head_origin(self) -> str:
        """Where the arm's MLM head came from, so that the report knows whether "before" figures mean anything."""
        kind = ARMS[self.arm]
        if self.checkpoint is not None:
            return f"the {self.checkpoint.arm} arm's at step {self.checkpoint.step}"
        if kind.from_scratch:
            return "random"
        if kind.start == "continued":
            return "the continued arm's"
        if self.warm_head is not None:
            return "warmed-up"
        return "checkpoint" if self.warmup_enabled == "auto" else "checkpoint or random (warm-up off)"


def warmup_record(start: ArmStart) -> dict[str, Any] | None:
    """The general warm-up the arm's start went through (its steps, tokens and what it trained), recorded in the
    arm's summary so its card says the arm began from the warmed-up base, not the checkpoint itself; None when
    the arm did not start from it."""
    if start.warm_head is None or ARMS[start.arm].start not in ("base", "extended"):
        return None
    summary = start.warm_head.parent / "summary.json"  # written by base_warmup.ensure_base_warmup
    warm = json.loads(summary.read_text(encoding="utf-8")) if summary.is_file() else {}
    return {key: warm.get(key) for key in ("steps", "tokens", "train")}


def base_reference(cfg: DomainConfig, layout: RunLayout) -> str:
    """The ``base`` of every comparison: the warmed-up base when the run made one (a checkpoint without its
    MLM head becomes a masked-LM first, as RoBERTa is the base of "Don't Stop Pretraining"), else the
    configured checkpoint."""
    warm = warm_model_folder(cfg, layout)
    return str(warm) if warm is not None else cfg.base_model.name_or_path


def arm_start(cfg: DomainConfig, arm: str, layout: RunLayout) -> ArmStart:
    """Where ``arm`` starts from.

    Raises:
        ModelError: the vocab stage's output the arm needs is missing, or the arm is unknown.
    """
    if arm not in ARMS:
        raise ModelError(f"unknown arm {arm!r}; arms are {', '.join(ARMS)}", field="pretrain.arms")
    warm = warm_model_folder(cfg, layout)
    enabled = cfg.pretrain.base_warmup.enabled
    kind = ARMS[arm]
    checkpoint = start_of(cfg.pretrain.start_from, arm)
    if checkpoint is not None:
        return ArmStart(arm, str(start_checkpoint(layout, arm, checkpoint)), None, enabled, checkpoint)
    if kind.start == "base":
        return ArmStart(arm, base_reference(cfg, layout), warm, enabled)
    if kind.start == "continued":
        folder = Path(layout.pretrained_model("continued"))
        if not (folder / "config.json").is_file():
            raise ModelError(f"arm {arm} starts from the continued arm's model: train continued first", file=folder)
        return ArmStart(arm, str(folder), None, enabled)
    if kind.start == "extended":
        folder = Path(layout.extended_model)
        if not (folder / "config.json").is_file():
            raise ModelError(
                "extended model not found (run the vocab stage first: domainbert vocab DOMAIN)", file=folder
            )
        return ArmStart(arm, str(folder), warm, enabled)
    folder = Path(layout.tokenizer)
    if not folder.is_dir():
        raise ModelError(
            "domain tokenizer not found (run the vocab stage first: domainbert vocab DOMAIN)", file=folder
        )
    return ArmStart(arm, str(folder), None, enabled)


def start_checkpoint(layout: RunLayout, arm: str, start: StartFromConfig) -> Path:
    """The kept checkpoint folder ``arm`` starts from (``pretrain.start_from``), verified.

    Raises:
        ConfigError: the source arm keeps no complete, intact checkpoint at that step (one line naming the field).
    """
    root = Path(layout.pretrain(start.arm)) / "checkpoints"
    kept = dict(list_checkpoints(root))
    field = f"pretrain.start_from.{arm}.step"
    if start.step not in kept:
        listed = ", ".join(str(step) for step in kept) or "none: train it first"
        raise ConfigError(f"{start.arm} keeps no checkpoint at step {start.step} (kept: {listed})", field=field)
    try:
        verify_checkpoint(kept[start.step])
    except CheckpointError as exc:
        raise ConfigError(f"{start.arm}'s checkpoint at step {start.step} is damaged: {exc}", field=field) from None
    return kept[start.step]


def load_arm(cfg: DomainConfig, start: ArmStart) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(masked-LM model, tokenizer) of an arm's start, ready to train; SDPA attention where available."""
    from transformers import AutoModelForMaskedLM, AutoModelForPreTraining

    source, nsp = start.source, cfg.pretrain.next_sentence_prediction
    scratch = ARMS[start.arm].from_scratch
    tokenizer = load_tokenizer_folder(source) if scratch else load_tokenizer(source)
    if scratch and start.checkpoint is None:
        torch.manual_seed(cfg.pretrain.seed)
        config = scratch_config(cfg, tokenizer)  # transformers picks SDPA where the family has it (DeBERTa has not)
        model = (AutoModelForPreTraining if nsp else AutoModelForMaskedLM).from_config(config)
    else:
        model = load_pretraining_model(source) if nsp else load_mlm_model(source)
    if ARMS[start.arm].start == "extended" and start.warm_head is not None:
        model = extend_warm_model(start.warm_head, Path(source), tokenizer)
    if can_switch_attention(model):
        with contextlib.suppress(Exception):
            model.set_attn_implementation("sdpa")
    # accepts_loss_kwargs lets transformers normalise the loss over the whole accumulated batch
    # (num_items_in_batch); off, the loss stays the micro-batch mean that the engine scales under accumulation.
    model.accepts_loss_kwargs = False
    return model, tokenizer


def extend_warm_model(warm: Path, extended: Path, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """The warmed base with the vocab stage's new tokens (``extended/extension.json``), initialised as the
    vocab stage did (``vocab.init``, kept in ``extension.json``): by default each new row the mean of its
    pieces' rows (AdaLM), in the warmed weights."""
    import json

    from domainbert.vocab.extend import DEFAULT_INIT, extend_model

    model = load_mlm_model(str(warm))
    record = json.loads((extended / "extension.json").read_text())
    rows = record.get("tokens", [])
    # one token in, one id out; transformers' annotation covers lists as well
    pieces = [[int(tokenizer.convert_tokens_to_ids(p)) for p in row["base_pieces"]] for row in rows]  # type: ignore[arg-type]
    return extend_model(model, [int(row["id"]) for row in rows], pieces, str(record.get("init", DEFAULT_INIT)))
