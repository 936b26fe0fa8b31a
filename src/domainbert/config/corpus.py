"""Typed config of the corpus stage (``corpus:`` in a domain YAML)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from domainbert.config.schema import PathStr, StrictModel


class LocalSource(StrictModel):
    """Local files or globs: JSONL/JSON, text, CSV/TSV, Parquet; gzip, bz2, xz or zstd compressed."""

    type: Literal["local"]
    """local: files on this machine."""
    name: str = Field(description="Source name kept on every document and used in its id.")
    paths: list[PathStr] = Field(min_length=1, description="Files or globs, relative to the YAML's folder.")
    format: Literal["auto", "jsonl", "json", "text_lines", "text_blocks", "csv", "tsv", "parquet"] = "auto"
    """How the files are read; auto: from each file's name."""
    text_field: str = "text"
    """The field holding the text (JSON, JSONL, CSV, TSV, Parquet)."""
    text_template: str | None = Field(
        None, description="Python format string joining fields, e.g. '{title}\\n\\n{abstract}'."
    )
    id_field: str | None = Field("id", description="Field holding a document id; else source + position.")
    max_documents: int | None = Field(None, ge=1, description="Cap on documents taken from this source.")


class HFSource(StrictModel):
    """A Hugging Face dataset, streamed (needs the internet at run time)."""

    type: Literal["hf"]
    """hf: a Hugging Face dataset, streamed (needs the network)."""
    name: str
    """The source's name in counts and document ids."""
    dataset: str = Field(description="Hub id, e.g. 'allenai/scirepeval' or 'lex_glue'.")
    config_name: str | None = None
    """The dataset's configuration (subset), when it has several."""
    split: str = "train"
    """The split to stream."""
    text_field: str = "text"
    """The field holding the text."""
    text_template: str | None = None
    """A format string over the record's fields (e.g. '{title}. {abstract}'); wins over text_field."""
    id_field: str | None = None
    """The field holding a document id; default: the record's position."""
    max_documents: int | None = Field(None, ge=1)
    """Stop after this many documents (all when unset)."""


SourceConfig = LocalSource | HFSource


class FilterSpec(StrictModel):
    """A registered filter or transform by versioned name, with its options (validated by the component)."""

    name: str
    """A versioned filter name (e.g. min_length_v1; see corpus/filters.py)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The filter's own options."""


class DedupConfig(StrictModel):
    """Duplicate removal: exact (normalised text) and near (MinHash LSH), as datatrove and dolma do."""

    exact: bool = True
    """Drop documents whose normalised text was seen before."""
    near: bool = True
    """Drop near-duplicates (MinHash LSH over word n-grams)."""
    threshold: float = Field(
        0.8, gt=0, le=1, description="Estimated Jaccard similarity above which documents are near-duplicates."
    )
    num_perm: int = Field(128, ge=16)
    """MinHash permutations: more give a sharper similarity estimate, at more cost."""
    ngram: int = Field(5, ge=1, description="Word n-gram size of the MinHash shingles.")


class DecontaminationConfig(StrictModel):
    """Keeping the tasks' evaluation text out of the corpus, and the audit that checks it."""

    enabled: bool = True
    """Drop corpus documents that share n-grams with the tasks' evaluation text."""
    ngram: int = Field(13, ge=3, description="Word n-gram length indexed from evaluation texts.")
    splits: list[Literal["train", "validation", "test"]] = ["validation", "test"]
    """The task splits whose text is kept out of the corpus."""
    max_overlap: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Drop a whole document when at least this fraction of its n-grams hit the evaluation index; below it, only the sentences that hit are removed.",
    )
    min_words: int = Field(
        4,
        ge=1,
        description="Evaluation texts shorter than ngram words are matched as whole word sequences anywhere in a document; those shorter than this only against a whole document (a two-word text occurs in countless unrelated ones).",
    )
    audit: bool = Field(
        True,
        description="After the build, check every evaluation text of the splits against the final corpus (verbatim and n-gram counts in the manifest and report), independently of the decontamination code.",
    )
    allow_leaks: bool = Field(
        False,
        description="Accept evaluation texts the audit finds verbatim in the corpus (shown in red in the report) instead of failing the stage.",
    )

    @model_validator(mode="after")
    def _min_words_within_ngram(self) -> DecontaminationConfig:
        if self.min_words > self.ngram:
            raise ValueError(f"min_words ({self.min_words}) must not exceed ngram ({self.ngram})")
        return self


class CorpusConfig(StrictModel):
    """The corpus stage: sources read, filters applied in order, deduplication, decontamination and sharding."""

    sources: list[SourceConfig] = Field(min_length=1)
    filters: list[FilterSpec] = Field(default_factory=list)
    dedup: DedupConfig = DedupConfig()
    decontamination: DecontaminationConfig = DecontaminationConfig()
    validation_fraction: float = Field(0.02, gt=0, lt=0.5)
    """Share of documents held out (the pretraining arms' domain perplexity)."""
    shard_documents: int = Field(5000, ge=1)
    """Documents per output shard and per unit of parallel work."""
    max_malformed_lines: int = Field(
        0, ge=0, description="Malformed input lines skipped (and counted) before failing."
    )
    max_document_bytes: int = Field(
        16 << 20,
        ge=1024,
        description="A document (line, text block or CSV field) over this many bytes is skipped with a warning and counted, so memory stays bounded whatever one input looks like.",
    )
    seed: int = 13
    """Seed of the train/validation split and of any sampling."""
    workers: int = Field(2, ge=1, description="Processes that clean, filter and hash input shards in parallel.")
    write_dropped: bool = Field(
        False, description="Also write dropped documents with their reason to dropped.jsonl.gz."
    )
