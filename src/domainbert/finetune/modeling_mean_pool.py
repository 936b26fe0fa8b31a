"""The mean-pooling sequence classifier (``finetune.pooling: mean``) as a Hugging Face model with custom code.

A saved fine-tuned classifier (``finetune.save_models``) carries a copy of this file, and its ``config.json``
maps ``AutoConfig`` and ``AutoModelForSequenceClassification`` to the classes here, so the folder loads with
``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` without domainbert
installed. Transformers has no class that pools by the mean of the last hidden states, which is why the code
travels with the weights. The weights are those of ``pooling.MeanPoolClassifier`` under the same names
(``encoder.*``, ``classifier.*``), and the forward pass computes the same logits. The config's own
``model_type`` is not one transformers knows, so loading without ``trust_remote_code`` fails loudly instead of
building a [CLS]-pooler head on these weights.

This file and ``pool_forward.py`` import only torch and transformers (both are copied into the saved folder,
where they run); it trains nothing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from .pool_forward import pool_and_classify


class MeanPoolConfig(PretrainedConfig):
    """An encoder's config (``encoder``) plus the head's: labels, ``multi_label``, ``classifier_dropout`` and
    ``chunk_length`` (chunk and pool: None, or the window length a long text is cut into)."""

    model_type = "domainbert_mean_pool"

    def __init__(
        self,
        encoder: dict[str, Any] | PretrainedConfig | None = None,
        multi_label: bool = False,
        classifier_dropout: float = 0.1,
        chunk_length: int | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(encoder, dict):
            encoder = AutoConfig.for_model(**encoder)
        self.encoder = encoder
        self.multi_label = multi_label
        self.classifier_dropout = classifier_dropout
        self.chunk_length = chunk_length  # chunk and pool: each window of this many tokens encoded on its own
        if encoder is not None:
            kwargs.setdefault("hidden_size", encoder.hidden_size)
        super().__init__(**kwargs)


class MeanPoolForSequenceClassification(PreTrainedModel):
    """Encoder, masked mean of its last hidden states, dropout, one linear layer."""

    config_class = MeanPoolConfig
    base_model_prefix = "encoder"

    def __init__(self, config: MeanPoolConfig) -> None:
        super().__init__(config)
        self.encoder = AutoModel.from_config(config.encoder)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, int(config.num_labels or 0))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # Only reached for weights the folder lacks: the encoder's own ones come from its checkpoint.
        if module is self.classifier:
            nn.init.normal_(module.weight, std=getattr(self.config.encoder, "initializer_range", 0.02))
            nn.init.zeros_(module.bias)

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.get_input_embeddings()

    @property
    def chunk_length(self) -> int | None:
        return getattr(self.config, "chunk_length", None)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        loss, logits = pool_and_classify(
            self, self.config.multi_label, input_ids, attention_mask, token_type_ids, labels
        )
        return SequenceClassifierOutput(loss=loss, logits=logits)
