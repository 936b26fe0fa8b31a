"""A sequence classifier over the mean of the encoder's last hidden states (``finetune.pooling: mean``).

The default head (``pooling: cls``) is transformers' ``*ForSequenceClassification``: the [CLS] state through
a pooler that ``runner.fresh_pooler`` initialises anew for every model, since a pooler is not something every
model has on equal terms (a masked-LM model has none, all-MiniLM carries an unused one, a from-scratch model's
is random). The mean over the non-padding tokens, then dropout and one linear layer, is the alternative: a
summary every encoder gives from the first step, which scored higher at the same learning rate
(studies/pooling.md), at the cost of a saved model that needs its own code.

``head_pooler`` finds the pooler the stock head reads through (initialised anew, and trained in frozen mode).

The module mimics the parts of a transformers model the fine-tuning loop uses: ``forward(**batch)`` returning
``loss`` (given labels) and ``logits``, ``base_model`` (frozen mode freezes it) and ``get_input_embeddings``.
It does not save itself as a Hugging Face folder: ``export.save_task_model`` moves its weights into
``modeling_mean_pool.MeanPoolForSequenceClassification``, which shares its forward pass (``pool_and_classify``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from domainbert.finetune.pool_forward import pool_and_classify

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass
class ClassifierOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor


class MeanPoolClassifier(nn.Module):
    """``encoder`` (an ``AutoModel``) + masked mean pooling + dropout + linear head.

    Args:
        encoder: the pretrained encoder without any head.
        num_labels: output size.
        multi_label: sigmoid outputs with binary cross-entropy (labels are multi-hot floats); else softmax.
    """

    def __init__(self, encoder: PreTrainedModel, num_labels: int, multi_label: bool = False) -> None:
        super().__init__()
        self.encoder = encoder
        config = encoder.config
        rate = getattr(config, "hidden_dropout_prob", None)  # 0.0 is a setting: no dropout
        self.dropout = nn.Dropout(rate if rate is not None else getattr(config, "dropout", 0.1))
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        std = getattr(config, "initializer_range", 0.02)
        nn.init.normal_(self.classifier.weight, std=std)
        nn.init.zeros_(self.classifier.bias)
        self.multi_label = multi_label
        self.config = config
        self.chunk_length: int | None = None  # chunk and pool: the window length (``pool_forward``); None: off

    @property
    def base_model(self) -> nn.Module:
        return self.encoder

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.get_input_embeddings()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ClassifierOutput:
        loss, logits = pool_and_classify(self, self.multi_label, input_ids, attention_mask, token_type_ids, labels)
        return ClassifierOutput(loss=loss, logits=logits)


def head_pooler(model: PreTrainedModel | MeanPoolClassifier) -> nn.Module | None:
    """The pooler (BERT's dense + tanh over [CLS]) a transformers sequence classifier's head reads through,
    which sits in its encoder; None for the mean-pooling classifier (its encoder's pooler goes unused), a token
    classifier, and models whose classification head holds its own dense layer (RoBERTa, DeBERTa, ELECTRA)."""
    pooler = getattr(model.base_model, "pooler", None)
    return None if isinstance(model, MeanPoolClassifier) or not isinstance(pooler, nn.Module) else pooler
