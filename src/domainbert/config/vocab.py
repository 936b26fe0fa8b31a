"""Typed config of the vocabulary stage (``tokenizer:`` and ``vocab:`` in a domain YAML)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from domainbert.config.schema import PathStr, StrictModel


class TokenizerConfig(StrictModel):
    """The domain tokenizer trained on the corpus's train split."""

    kind: Literal["wordpiece", "sentencepiece_unigram", "sentencepiece_bpe"]
    """The domain tokenizer's algorithm: WordPiece (BERT, SciBERT) or SentencePiece (XLM-R, DeBERTa-v3)."""
    vocab_size: int | None = Field(None, ge=100, description="Tokens, specials included; default: the base model's.")
    lowercase: bool
    """Lowercase before tokenizing (an uncased vocabulary)."""
    min_frequency: int = Field(2, ge=1)
    """How often a token or merge must occur in the corpus to enter the vocabulary."""
    model_max_length: int = Field(512, ge=8, description="Saved in the tokenizer folder (BERT's position limit).")

    def size_given(self, base_size: int) -> int:
        """The domain vocabulary's size: ``vocab_size``, or else the base tokenizer's, ``base_size``."""
        return self.vocab_size or base_size


class ReferenceVocab(StrictModel):
    """A reference tokenizer: a BERT vocab.txt, a GPT-2 vocab.json (+ merges.txt), a tokenizer folder or a hub id."""

    name: str
    """The reference's name in the vocabulary report (e.g. bert-base-uncased)."""
    path: PathStr | None = Field(None, description="A vocab.txt, a GPT-2 style vocab.json or a tokenizer folder.")
    hub: str | None = Field(None, description="A Hugging Face hub id (needs the internet unless cached).")
    merges: PathStr | None = Field(None, description="merges.txt of a byte-level BPE vocab.json (default: beside it).")
    lowercase: bool | None = Field(None, description="Lower-case before WordPiece; default: inferred from the vocab.")

    @model_validator(mode="after")
    def _one_source(self) -> ReferenceVocab:
        if (self.path is None) == (self.hub is None):
            raise ValueError("give exactly one of 'path' and 'hub'")
        return self


class ExtensionConfig(StrictModel):
    """The extended-vocabulary arm's new tokens."""

    enabled: bool = True
    """Build the extended-vocabulary model: the base's vocabulary plus the domain's most frequent missing tokens."""
    num_tokens: int | None = Field(
        None,
        ge=0,
        description="New tokens added to the base vocabulary (the most "
        "frequent x fragmented candidates); default: the recommendation's number, the "
        "words its rule 3 counts. A number here overrides it (the report says so).",
    )
    min_count: int = Field(3, ge=1, description="A candidate word occurs at least this often in the train split.")


class PublishedOverlap(StrictModel):
    """A published overlap figure to set beside ours (e.g. SciBERT's 42% with BERT's base vocabulary)."""

    name: str
    """The published model (e.g. SciBERT)."""
    reference: str = Field(description="Name of the reference in ``references`` it was measured against.")
    overlap: float = Field(ge=0, le=1)
    """Its reported overlap with BERT's vocabulary (a fraction)."""
    vocab_size: int = Field(ge=1)
    """Its vocabulary size."""
    corpus_words: float = Field(gt=0, description="Words (or tokens) the published vocabulary was trained on.")
    source: str = ""
    """Where the figure is published."""


class RecommendConfig(StrictModel):
    """Thresholds of the continue / extend / scratch recommendation (see ``domainbert.vocab.recommend``)."""

    continue_max_shift: float = Field(0.05, description="Domain overlap at most this far below the control's.")
    continue_max_saving: float = Field(0.05, description="Domain tokenizer shortens held-out sequences by less.")
    continue_max_fertility: float = Field(1.3, description="Base sub-tokens per held-out word at most this.")
    max_unk_rate: float = Field(0.005, description="Base UNK rate above this rules out plain continuation.")
    scratch_min_words: float = Field(1e8, description="Train-split words needed before training from scratch pays.")
    scratch_min_shift: float = Field(0.10, description="Overlap shift (control - domain) that favours a new vocab.")
    scratch_min_saving: float = Field(0.10, description="Sequence-length saving that favours a new vocab.")
    extend_min_per_million: float = Field(20.0, description="Extension candidates occur this often per million words.")
    extend_min_pieces: int = Field(
        3, ge=2, description="... and the base tokenizer splits them into this many pieces."
    )


class VocabConfig(StrictModel):
    """The vocabulary stage: the domain tokenizer's fit against reference vocabularies, and the extension."""

    references: list[ReferenceVocab] = Field(min_length=1)
    curve_sizes: list[int] = Field(default_factory=lambda: [5000, 10000, 20000, 30000])
    """Vocabulary sizes of the fit curve (overlap with the references and fertility on the corpus)."""
    control_corpus: list[PathStr] = Field(
        description="General-domain text (globs) for the same-size control vocabulary."
    )
    heldout_documents: int = Field(500, ge=10, description="Validation documents used for fertility and UNK rate.")
    extension: ExtensionConfig = ExtensionConfig()
    init: Literal["mean_of_pieces", "random"] = "mean_of_pieces"
    """How the extended model's new token rows start: the mean of their pieces' rows, or drawn at random."""
    min_words_per_token: float = Field(2.0, gt=0, description="Train-split words per requested vocab entry, at least.")
    top_words: int = Field(25, ge=1, description="Rows in the fragmented-words and missing-tokens tables.")
    published: list[PublishedOverlap] = Field(default_factory=list)
    recommend: RecommendConfig = RecommendConfig()
