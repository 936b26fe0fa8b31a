"""Typed config of the vocabulary stage (``tokenizer:`` and ``vocab:`` in a domain YAML)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domainbert.schema import PathStr, StrictModel


class TokenizerConfig(StrictModel):
    """The domain tokenizer trained on the corpus's train split."""

    kind: Literal["wordpiece", "sentencepiece_unigram", "sentencepiece_bpe"]
    vocab_size: int = Field(ge=100)
    lowercase: bool
    min_frequency: int = Field(2, ge=1)


class ReferenceVocab(StrictModel):
    """A reference tokenizer: a vocab.txt, a tokenizer folder, or a hub id (needs the internet)."""

    name: str
    path: PathStr


class ExtensionConfig(StrictModel):
    enabled: bool = True
    num_tokens: int = Field(1000, ge=1, description="New tokens added to the base vocabulary (frequency x fragmentation).")


class VocabConfig(StrictModel):
    references: list[ReferenceVocab] = Field(min_length=1)
    curve_sizes: list[int] = Field(default_factory=lambda: [5000, 10000, 20000, 30000])
    control_corpus: list[PathStr] = Field(description="General-domain text (globs) for the same-size control vocabulary.")
    heldout_documents: int = Field(500, ge=10, description="Validation documents used for fertility and UNK rate.")
    extension: ExtensionConfig = ExtensionConfig()
