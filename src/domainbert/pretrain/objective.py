"""The masked-LM objective as a module, the prediction heads it reads, and the model arithmetic (parameters,
FLOPs per token) that plans and throughput figures use.

``MLMObjective`` wraps a masked-LM model so that ``forward(input_ids, labels)`` returns the loss. With sparse
prediction it runs the encoder, gathers the masked positions and applies the prediction head only there
(academic-budget-bert's trick): the loss equals the dense one, while the vocabulary-sized output layer costs
~15% of the dense compute. It wraps the model as a module so DeepSpeed ZeRO-3 hooks see every parameter.
Loading models is ``model.py``'s; training is ``trainer.py``'s.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


HEAD_ATTRS = ("cls", "lm_head")  # BERT-family / RoBERTa-family MLM heads


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


def gather(values: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """``values[mask]`` (``mask`` over the first two dimensions): by the flat ``positions`` of its True entries
    when the host found them (``masking.host_positions``: a fixed-size gather, no wait for the device), else by
    the mask itself (evaluation). Both give the same rows in the same order, and the same gradients."""
    if positions is None:
        return values[mask]
    return values.flatten(0, 1).index_select(0, positions)


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
    or None, so the trainer can log NSP without a second output type through DeepSpeed and DDP. Training passes
    ``masked_positions`` (and ``real_positions``, which replaced-token detection reads) found on the host, so
    that no step waits for the device (``gather``).
    """

    def __init__(
        self, model: PreTrainedModel, sparse: bool = True, autocast_dtype: torch.dtype | None = None, nsp: bool = False
    ) -> None:
        super().__init__()
        self.model = model
        # The head's attribute name, not the module: registering it twice would duplicate state_dict keys.
        self.head_attr = next((n for n in HEAD_ATTRS if isinstance(getattr(model, n, None), nn.Module)), None)
        self.sparse = sparse and self.head_attr is not None
        self.nsp = nsp
        self.autocast_dtype = autocast_dtype
        self.last_nsp: tuple[torch.Tensor, torch.Tensor, int] | None = None

    def extras(self) -> nn.Module | None:
        """Modules a checkpoint holds besides the Hugging Face model (none for MLM)."""
        return None

    def _autocast(self, device: torch.device) -> contextlib.AbstractContextManager[None]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=self.autocast_dtype)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        real_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        self.last_nsp = None
        with self._autocast(input_ids.device):
            if not (self.sparse or self.nsp):
                logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
                return nn.functional.cross_entropy(
                    logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100
                )
            # Only models with segment embeddings take token_type_ids (DistilBERT's forward has no such argument).
            extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            encoded = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask, **extra)
            hidden = encoded.last_hidden_state
            # without NSP the head is sparse's, so a known attribute
            head = self.model.get_submodule("cls.predictions" if self.nsp else cast(str, self.head_attr))
            if self.sparse:
                selected = labels != -100
                logits = head(gather(hidden, selected, masked_positions))
                targets = gather(labels, selected, masked_positions)
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


def detection_flops(model: PreTrainedModel, seq_len: int, mask_rate: float, generator_share: float) -> float:
    """Training FLOPs per token of replaced-token detection on ``model``: its encoder at every position (no
    vocabulary projection) plus a generator of the same width with ``generator_share`` of its layers (at least
    one) and its sparse masked-LM head (``replaced_tokens.build_generator``)."""
    layers = int(model.config.num_hidden_layers)
    encoder = flops_per_token(model, seq_len, mask_rate=0.0, sparse=True)
    head = flops_per_token(model, seq_len, mask_rate, sparse=True) - encoder
    return encoder + encoder * max(1, round(layers * generator_share)) / layers + head
