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
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from domainbert.errors import ModelError
from domainbert.models import has_tokenizer, load_mlm_model, load_tokenizer, resolve_model_ref
from domainbert.pretrain import cpu_dropout

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# BERT size table (Turc et al. 2019, "Well-Read Students Learn Better"): (layers, hidden).
SCRATCH_SIZES: dict[str, tuple[int, int]] = {
    "tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768), "large": (24, 1024),
}
HEAD_ATTRS = ("cls", "lm_head")  # BERT-family / RoBERTa-family MLM heads


def arm_source(cfg, arm: str, layout) -> str:
    """Where an arm's starting point comes from (a model reference or folder)."""
    if arm == "continued":
        from domainbert.pretrain.head_warmup import warm_model_folder

        warm = warm_model_folder(cfg, layout)  # a base without its MLM head starts from the warmed-up head
        return str(warm) if warm is not None else cfg.base_model.name_or_path
    if arm == "extended":
        folder = Path(layout.extended_model)
        if not (folder / "config.json").is_file():
            raise ModelError("extended model not found (run the vocab stage first: domainbert vocab DOMAIN)",
                             file=folder)
        return str(folder)
    if arm == "scratch":
        folder = Path(layout.tokenizer)
        if not folder.is_dir():
            raise ModelError("domain tokenizer not found (run the vocab stage first: domainbert vocab DOMAIN)",
                             file=folder)
        return str(folder)
    raise ModelError(f"unknown arm {arm!r}; arms are continued, extended, scratch", field="pretrain.arms")


def load_tokenizer_folder(folder: str):
    """A bare tokenizer folder (no model config beside it), as the vocab stage writes it."""
    from transformers import AutoTokenizer

    if not has_tokenizer(folder):
        raise ModelError("folder has no tokenizer (tokenizer.json, vocab.txt or a SentencePiece model)", file=folder)
    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load tokenizer: {exc}", file=folder) from None


def scratch_config(cfg, tokenizer):
    """The architecture of a from-scratch model: the base config or a named size, sized to the tokenizer."""
    from transformers import AutoConfig, BertConfig

    base = AutoConfig.from_pretrained(resolve_model_ref(cfg.base_model.name_or_path))
    size = cfg.pretrain.scratch_size
    if size == "base_config":
        config = base
    else:
        layers, hidden = SCRATCH_SIZES[size]
        config = BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=max(hidden // 64, 2),
                            intermediate_size=4 * hidden,
                            max_position_embeddings=getattr(base, "max_position_embeddings", 512))
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    needed = max(p.seq_len for p in cfg.pretrain.seq_len_schedule) if cfg.pretrain.seq_len_schedule else cfg.pretrain.seq_len
    config.max_position_embeddings = max(config.max_position_embeddings, needed)
    return config


def load_pretraining_model(ref: str):
    """``AutoModelForPreTraining`` (MLM + NSP heads for BERT); heads the checkpoint lacks are new."""
    from transformers import AutoModelForPreTraining
    from transformers.utils import logging as hf_logging

    resolved = resolve_model_ref(ref)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "newly initialized" pooler/NSP head is expected for an MLM checkpoint
    try:
        return AutoModelForPreTraining.from_pretrained(resolved)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load model for pretraining: {exc}", file=resolved) from None
    finally:
        hf_logging.set_verbosity(verbosity)


def load_arm(cfg, arm: str, layout) -> tuple[PreTrainedModel, Any, str]:
    """(masked-LM model, tokenizer, source) of an arm, ready to train; SDPA attention where available."""
    from transformers import AutoModelForMaskedLM, AutoModelForPreTraining

    source = arm_source(cfg, arm, layout)
    nsp = cfg.pretrain.next_sentence_prediction
    tokenizer = load_tokenizer_folder(source) if arm == "scratch" else load_tokenizer(source)
    if arm == "scratch":
        torch.manual_seed(cfg.pretrain.seed)
        config = scratch_config(cfg, tokenizer)
        config._attn_implementation = "sdpa"
        model = (AutoModelForPreTraining if nsp else AutoModelForMaskedLM).from_config(config)
    else:
        model = load_pretraining_model(source) if nsp else load_mlm_model(source)
    if arm == "extended":
        from domainbert.pretrain.head_warmup import copy_warm_head, warm_model_folder

        warm = warm_model_folder(cfg, layout)
        if warm is not None:
            copy_warm_head(model, warm, Path(source))
    with contextlib.suppress(Exception):
        model.set_attn_implementation("sdpa")
    # accepts_loss_kwargs lets transformers normalise the loss over the whole accumulated batch
    # (num_items_in_batch); off, the loss stays the micro-batch mean that the engine scales under accumulation.
    model.accepts_loss_kwargs = False
    return model, tokenizer, source


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
    with contextlib.suppress(Exception):  # models without an eager/SDPA switch keep theirs
        model.set_attn_implementation(implementation)
    return getattr(config, "_attn_implementation", implementation) or implementation


def prediction_head(model: nn.Module) -> nn.Module | None:
    for name in HEAD_ATTRS:
        head = getattr(model, name, None)
        if isinstance(head, nn.Module):
            return head
    return None


def nsp_head(model: nn.Module) -> nn.Module | None:
    """The next-sentence classifier of a ``*ForPreTraining`` model (BERT's ``cls.seq_relationship``)."""
    head = getattr(getattr(model, "cls", None), "seq_relationship", None)
    return head if isinstance(head, nn.Module) else None


class MLMObjective(nn.Module):
    """``forward(input_ids, labels, attention_mask=None, ...) -> loss`` over a masked-LM model.

    Args:
        model: an ``AutoModelForMaskedLM`` model, or with ``nsp`` an ``AutoModelForPreTraining`` one.
        sparse: apply the prediction head only at the masked positions (falls back to dense when the
            model's head is not a known attribute).
        autocast_dtype: bf16/fp16 autocast for the forward pass, or None for fp32.
        nsp: add the next-sentence loss where ``next_sentence_label`` is given (the model must have a pooler
            and ``cls.seq_relationship``; preflight checks this).

    After each forward, ``last_nsp`` holds the detached (NSP loss, correct predictions, pairs) of the batch,
    or None, so the trainer can log NSP without a second output type through DeepSpeed and DDP.
    """

    def __init__(self, model: PreTrainedModel, sparse: bool = True, autocast_dtype: torch.dtype | None = None,
                 nsp: bool = False) -> None:
        super().__init__()
        self.model = model
        # The head's attribute name, not the module: registering it twice would duplicate state_dict keys.
        self.head_attr = next((n for n in HEAD_ATTRS if isinstance(getattr(model, n, None), nn.Module)), None)
        self.sparse = sparse and self.head_attr is not None
        self.nsp = nsp
        self.autocast_dtype = autocast_dtype
        self.last_nsp: tuple[torch.Tensor, torch.Tensor, int] | None = None

    def _autocast(self, device: torch.device):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=self.autocast_dtype)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None,
                next_sentence_label: torch.Tensor | None = None) -> torch.Tensor:
        self.last_nsp = None
        with self._autocast(input_ids.device):
            if not (self.sparse or self.nsp):
                logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
                return nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1),
                                                   ignore_index=-100)
            # Only models with segment embeddings take token_type_ids (DistilBERT's forward has no such argument).
            extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            encoded = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask, **extra)
            hidden = encoded.last_hidden_state
            # without NSP the head is sparse's, so a known attribute
            head = self.model.get_submodule("cls.predictions" if self.nsp else cast(str, self.head_attr))
            if self.sparse:
                selected = labels != -100
                logits, targets = head(hidden[selected]), labels[selected]
            else:
                logits, targets = head(hidden).flatten(0, 1), labels.view(-1)
            nsp_logits = None
            if self.nsp and next_sentence_label is not None:
                nsp_logits = self.model.get_submodule("cls.seq_relationship")(encoded.pooler_output)
        loss = nn.functional.cross_entropy(logits.float(), targets, ignore_index=-100)
        if nsp_logits is not None and next_sentence_label is not None:  # computed only with labels
            nsp_loss = nn.functional.cross_entropy(nsp_logits.float(), next_sentence_label)
            correct = (nsp_logits.argmax(dim=-1) == next_sentence_label).sum()
            self.last_nsp = (nsp_loss.detach(), correct.detach(), int(next_sentence_label.numel()))
            loss = loss + nsp_loss
        return loss


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Total, embedding and non-embedding parameter counts (shared tensors counted once)."""
    seen, total, embedding = set(), 0, 0
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        if "embeddings" in name:
            embedding += p.numel()
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}


def flops_per_token(model: PreTrainedModel, seq_len: int, mask_rate: float, sparse: bool) -> float:
    """Training FLOPs per token (forward + backward = 3x forward, Kaplan et al. 2020).

    Encoder: 2 * non-embedding params + 2 * layers * seq_len * hidden (attention scores) per token in the
    forward pass; the vocabulary projection (hidden x vocab) runs at every token when dense and only at the
    masked share when sparse.
    """
    config = model.config
    counts = count_parameters(model)
    hidden, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    head_params = hidden * vocab
    encoder_nonemb = counts["non_embedding"] - (hidden * hidden if prediction_head(model) is not None else 0)
    forward = 2 * encoder_nonemb + 2 * layers * seq_len * hidden
    forward += 2 * (hidden * hidden + head_params) * (mask_rate if sparse else 1.0)
    return float(3 * forward)
