"""Typed config of the corpus stage (``corpus:`` in a domain YAML)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from domainbert.config.schema import PathStr, StrictModel


class LocalSource(StrictModel):
    """Local files or globs: JSONL/JSON, text, CSV/TSV, Parquet; gzip, bz2, xz or zstd compressed."""

    type: Literal["local"]
    name: str = Field(description="Source name kept on every document and used in its id.")
    paths: list[PathStr] = Field(min_length=1, description="Files or globs, relative to the YAML's folder.")
    format: Literal["auto", "jsonl", "json", "text_lines", "text_blocks", "csv", "tsv", "parquet"] = "auto"
    text_field: str = "text"
    text_template: str | None = Field(
        None, description="Python format string joining fields, e.g. '{title}\\n\\n{abstract}'."
    )
    id_field: str | None = Field("id", description="Field holding a document id; else source + position.")
    max_documents: int | None = Field(None, ge=1, description="Cap on documents taken from this source.")


class HFSource(StrictModel):
    """A Hugging Face dataset, streamed (needs the internet at run time)."""

    type: Literal["hf"]
    name: str
    dataset: str = Field(description="Hub id, e.g. 'allenai/scirepeval' or 'lex_glue'.")
    config_name: str | None = None
    split: str = "train"
    text_field: str = "text"
    text_template: str | None = None
    id_field: str | None = None
    max_documents: int | None = Field(None, ge=1)


SourceConfig = LocalSource | HFSource


class FilterSpec(StrictModel):
    """A registered filter or transform by versioned name, with its options (validated by the component)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class DedupConfig(StrictModel):
    exact: bool = True
    near: bool = True
    threshold: float = Field(
        0.8, gt=0, le=1, description="Estimated Jaccard similarity above which documents are near-duplicates."
    )
    num_perm: int = Field(128, ge=16)
    ngram: int = Field(5, ge=1, description="Word n-gram size of the MinHash shingles.")


class DecontaminationConfig(StrictModel):
    enabled: bool = True
    ngram: int = Field(13, ge=3, description="Word n-gram length indexed from evaluation texts.")
    splits: list[Literal["train", "validation", "test"]] = ["validation", "test"]
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
    sources: list[SourceConfig] = Field(min_length=1)
    filters: list[FilterSpec] = Field(default_factory=list)
    dedup: DedupConfig = DedupConfig()
    decontamination: DecontaminationConfig = DecontaminationConfig()
    validation_fraction: float = Field(0.02, gt=0, lt=0.5)
    shard_documents: int = Field(5000, ge=1)
    max_malformed_lines: int = Field(
        0, ge=0, description="Malformed input lines skipped (and counted) before failing."
    )
    max_document_bytes: int = Field(
        16 << 20,
        ge=1024,
        description="A document (line, text block or CSV field) over this many bytes is skipped with a warning and counted, so memory stays bounded whatever one input looks like.",
    )
    seed: int = 13
    workers: int = Field(2, ge=1, description="Processes that clean, filter and hash input shards in parallel.")
    write_dropped: bool = Field(
        False, description="Also write dropped documents with their reason to dropped.jsonl.gz."
    )
