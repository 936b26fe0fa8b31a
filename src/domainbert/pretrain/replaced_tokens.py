"""Replaced-token detection (ELECTRA, Clark et al. 2020; DeBERTa-v3, He et al. 2021), the objective
EconBERTa was pretrained with, as a module beside ``MLMObjective``.

A generator (the arm's family, ``pretrain.rtd.generator_layers`` of its depth, the same width) shares the
arm's token embeddings, predicts the masked positions (its MLM loss is the perplexity counterpart) and
samples a token at each; the arm's own encoder, the discriminator, reads the corrupted sequence and a small
head says at every real position whether its token was replaced. A sampled token equal to the original counts
as original, as in ELECTRA. The loss is ``generator MLM + discriminator_weight * discriminator BCE``.

The discriminator is ``self.model`` (a ``*ForMaskedLM`` whose encoder is the arm's result), so checkpoints,
exports and the saved folder are the same as an MLM arm's; its MLM head is not trained. The generator and the
detection head travel in checkpoints (``extras``) and are discarded at the end, as ELECTRA's and DeBERTa-v3's
released discriminators did. Embeddings are shared as in ELECTRA (one tensor); DeBERTa-v3's
gradient-disentangled sharing is not implemented. This module does not train (``trainer.py`` does).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from domainbert.pretrain.objective import HEAD_ATTRS, MLMObjective, gather

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class DetectionFigures:
    """One forward pass's detached figures: the generator's MLM loss over ``masked`` positions, the
    discriminator's correct calls over ``positions`` real positions, and how many of them were ``replaced``
    (calling every token original scores ``1 - replaced / positions``: the accuracy's floor)."""

    generator_loss: torch.Tensor
    masked: int
    correct: torch.Tensor
    positions: int
    replaced: torch.Tensor


def corrupt(
    input_ids: torch.Tensor, labels: torch.Tensor, sampled: torch.Tensor, positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and targets: the original sequence (``labels`` where set, else
    ``input_ids``) with ``sampled`` at the masked positions in order (their flat ``positions`` when the host
    found them: no wait for the device), and 1.0 where a token differs from the original (a sample equal to the
    original is not a replacement)."""
    selected = labels != -100
    original = torch.where(selected, labels, input_ids)
    corrupted = original.clone()
    if positions is None:
        corrupted[selected] = sampled
    else:
        corrupted.view(-1).index_copy_(0, positions, sampled)
    return corrupted, (corrupted != original).float()


def build_generator(model: PreTrainedModel, layers_share: float) -> PreTrainedModel:
    """A new masked-LM of ``model``'s family and width with ``layers_share`` of its layers (at least one),
    its input embeddings (and so its tied output layer) the very tensor of ``model``'s."""
    from transformers import AutoModelForMaskedLM

    config = copy.deepcopy(model.config)
    config.num_hidden_layers = max(1, round(model.config.num_hidden_layers * layers_share))
    generator = AutoModelForMaskedLM.from_config(config)
    generator.set_input_embeddings(model.get_input_embeddings())
    generator.tie_weights()
    return generator


class ReplacedTokenObjective(MLMObjective):
    """``forward(input_ids, labels, attention_mask=None, token_type_ids=None) -> loss`` (see the module).

    Args:
        model: the arm's ``AutoModelForMaskedLM`` model (the discriminator's encoder is its base model).
        generator: ``build_generator(model, ...)``.
        discriminator_weight: ELECTRA's lambda.
        autocast_dtype: bf16/fp16 autocast for the forward pass, or None for fp32.

    After each forward ``last_detection`` holds its ``DetectionFigures``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        generator: PreTrainedModel,
        discriminator_weight: float,
        autocast_dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(model, sparse=False, autocast_dtype=autocast_dtype)
        self.generator = generator
        hidden = int(model.config.hidden_size)
        # ELECTRA's discriminator head: dense, activation, one logit per token.
        self.detection_head = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 1))
        self.generator_head = next((n for n in HEAD_ATTRS if isinstance(getattr(generator, n, None), nn.Module)), None)
        self.discriminator_weight = discriminator_weight
        self.last_detection: DetectionFigures | None = None

    def extras(self) -> nn.Module:
        """What a checkpoint holds besides the Hugging Face model: the generator and the detection head."""
        return nn.ModuleDict({"generator": self.generator, "detection_head": self.detection_head})

    def _generator_logits(
        self,
        input_ids: torch.Tensor,
        selected: torch.Tensor,
        attention_mask: torch.Tensor | None,
        positions: torch.Tensor | None,
    ) -> torch.Tensor:
        """The generator's logits at the masked positions (its head applied only there when it is a known one)."""
        if self.generator_head is None:
            logits = self.generator(input_ids=input_ids, attention_mask=attention_mask).logits
            return gather(logits, selected, positions)
        hidden = self.generator.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        head = self.generator.get_submodule(self.generator_head)
        return cast(torch.Tensor, head(gather(hidden, selected, positions)))

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
        selected = labels != -100
        with self._autocast(input_ids.device):
            logits = self._generator_logits(input_ids, selected, attention_mask, masked_positions)
            generator_loss = nn.functional.cross_entropy(logits.float(), gather(labels, selected, masked_positions))
            with torch.no_grad():  # no gradient flows from the discriminator into the generator (ELECTRA)
                probs = torch.softmax(logits.float(), dim=-1)
                # Training samples (ELECTRA); evaluation takes the generator's best guess, so it is deterministic.
                sampled = torch.multinomial(probs, 1).squeeze(-1) if self.training else probs.argmax(dim=-1)
                corrupted, replaced = corrupt(input_ids, labels, sampled, masked_positions)
            extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            encoded = self.model.base_model(input_ids=corrupted, attention_mask=attention_mask, **extra)
            scores = self.detection_head(encoded.last_hidden_state).squeeze(-1)
        real = attention_mask.bool() if attention_mask is not None else torch.ones_like(selected)
        if masked_positions is not None and attention_mask is None:  # every position is real: all of them, in order
            real_positions = torch.arange(real.numel(), device=real.device)
        real_scores, real_replaced = gather(scores, real, real_positions), gather(replaced, real, real_positions)
        detection_loss = nn.functional.binary_cross_entropy_with_logits(real_scores.float(), real_replaced)
        # the counts: the sizes of what was gathered (known to the host without reading the device)
        self.last_detection = DetectionFigures(
            generator_loss=generator_loss.detach(),
            masked=int(masked_positions.numel()) if masked_positions is not None else int(selected.sum()),
            correct=((real_scores > 0).float() == real_replaced).sum().detach(),
            positions=int(real_scores.shape[0]),
            replaced=real_replaced.sum().detach(),
        )
        return generator_loss + self.discriminator_weight * detection_loss
