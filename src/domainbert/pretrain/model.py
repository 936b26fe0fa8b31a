"""Models of the three arms and the MLM forward pass used in training.

- ``continued``: the base checkpoint with its tokenizer (a head-less base gets a new MLM head tied to the
  input embeddings, by transformers).
- ``extended``: the vocab stage's extended-model folder (base weights, domain tokens added, embeddings resized).
- ``scratch``: the domain tokenizer and a randomly initialised encoder: the base model's architecture, or a
  named size from the BERT size table (Turc et al. 2019), with ``vocab_size = len(tokenizer)``.
``MLMObjective`` wraps a masked-LM model so that ``forward(input_ids, labels)`` returns the loss. With sparse
prediction it runs the encoder, gathers the masked positions and applies the prediction head only there
(academic-budget-bert's trick): the loss equals the dense one, while the vocabulary-sized output layer costs
~15% of the dense compute. It wraps the model as a module so DeepSpeed ZeRO-3 hooks see every parameter.
With next-sentence prediction the arm's model is loaded as ``AutoModelForPreTraining`` (for BERT:
``BertForPreTraining``, pooler and ``cls.seq_relationship`` added, new where the checkpoint lacks them) and
the loss is MLM + NSP; the saved folder still loads as a masked-LM model.
This module does not train; ``trainer.py`` does.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import torch

from domainbert.config.domain import DomainConfig
from domainbert.core.errors import ModelError
from domainbert.core.models import has_tokenizer, quiet_transformers, resolve_model_ref
from domainbert.pretrain import cpu_dropout

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

# BERT size table (Turc et al. 2019, "Well-Read Students Learn Better"): (layers, hidden).
SCRATCH_SIZES: dict[str, tuple[int, int]] = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}


# Families whose position ids start after the padding id (RoBERTa's create_position_ids_from_input_ids).
OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert", "roberta-prelayernorm", "xmod", "data2vec-text"})


def load_tokenizer_folder(folder: str) -> PreTrainedTokenizerBase:
    """A bare tokenizer folder (no model config beside it), as the vocab stage writes it."""
    from transformers import AutoTokenizer

    if not has_tokenizer(folder):
        raise ModelError("folder has no tokenizer (tokenizer.json, vocab.txt or a SentencePiece model)", file=folder)
    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load tokenizer: {exc}", file=folder) from None


def scratch_config(cfg: DomainConfig, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
    """The architecture of a from-scratch model (``pretrain.scratch_model``, else the base config or a named
    BERT size), sized to the tokenizer: its vocabulary, padding id and the positions ``seq_len`` needs."""
    from transformers import AutoConfig, BertConfig

    base = AutoConfig.from_pretrained(resolve_model_ref(cfg.base_model.name_or_path))
    size, own = cfg.pretrain.scratch_size, cfg.pretrain.scratch_model
    if isinstance(own, dict):
        config = AutoConfig.for_model(**own)
    elif isinstance(own, str):
        try:
            config = AutoConfig.from_pretrained(resolve_model_ref(own))
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read the architecture: {exc}", field="pretrain.scratch_model") from None
    elif size == "base_config":
        config = base
    else:
        layers, hidden = SCRATCH_SIZES[size]
        config = BertConfig(
            num_hidden_layers=layers,
            hidden_size=hidden,
            num_attention_heads=max(hidden // 64, 2),
            intermediate_size=4 * hidden,
            max_position_embeddings=getattr(base, "max_position_embeddings", 512),
        )
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if own is not None:  # a foreign family's special ids (RoBERTa's bos 0, eos 2) are not the domain tokenizer's
        for name in ("bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id"):
            token_id = getattr(tokenizer, name, None)
            if hasattr(config, name) and token_id is not None:
                setattr(config, name, token_id)
    needed = (
        max(p.seq_len for p in cfg.pretrain.seq_len_schedule)
        if cfg.pretrain.seq_len_schedule
        else cfg.pretrain.seq_len
    )
    if config.model_type in OFFSET_POSITIONS:  # positions count from padding_idx + 1
        needed += config.pad_token_id + 1
    config.max_position_embeddings = max(getattr(config, "max_position_embeddings", 0) or 0, needed)
    return config


def load_pretraining_model(ref: str) -> PreTrainedModel:
    """``AutoModelForPreTraining`` (MLM + NSP heads for BERT); heads the checkpoint lacks are new."""
    from transformers import AutoModelForPreTraining

    resolved = resolve_model_ref(ref)
    try:
        with quiet_transformers():  # a new pooler/NSP head is expected for an MLM checkpoint
            return AutoModelForPreTraining.from_pretrained(resolved)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load model for pretraining: {exc}", file=resolved) from None


def can_switch_attention(model: PreTrainedModel) -> bool:
    """Whether transformers can switch the model's attention implementation (asked otherwise, it warns)."""
    check = getattr(model, "_can_set_attn_implementation", None)
    return bool(check()) if callable(check) else True


def training_attention(model: PreTrainedModel, device: torch.device, autocast_dtype: torch.dtype | None) -> str:
    """The attention implementation to train with (set on the model, and returned).

    SDPA everywhere except training under bf16/fp16 autocast on a CPU with attention dropout: PyTorch's CPU
    SDPA has no fused kernel with dropout and falls back to its math path, which upcasts the low-precision
    heads to fp32 (head-layout copies) and adds a scale multiplication and a "safe" softmax
    (isneginf/all/where) around the same matmul-softmax-dropout-matmul that transformers' eager attention runs
    directly, so bf16 steps are faster with eager; fp32 steps are not, so fp32 keeps SDPA. On a CPU the
    dropout masks are drawn by
    ``cpu_dropout`` (its eager attention under autocast, its dropout modules everywhere), a quarter of the
    generator calls of PyTorch's own dropout.
    """
    config = model.config
    dropout = getattr(config, "attention_probs_dropout_prob", None) or getattr(config, "attention_dropout", 0.0)
    implementation = "sdpa"
    if device.type == "cpu":
        cpu_dropout.install(model)
        if dropout and autocast_dtype is not None:
            implementation = cpu_dropout.ATTENTION
    if can_switch_attention(model):  # DeBERTa has one attention of its own: it keeps it
        with contextlib.suppress(Exception):
            model.set_attn_implementation(implementation)
    return getattr(config, "_attn_implementation", implementation) or implementation
