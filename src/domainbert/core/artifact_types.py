"""Typed stage artifacts: the corpus manifest, the vocabulary report, the base warm-up's and an arm's pretraining
summaries and a fine-tuning result, as pydantic models with a ``schema_version``.

Every stage writes its JSON artifact through ``dump_artifact`` and the report reads it through
``load_artifact``, so a field that is missing or of the wrong type is caught where it is written, and a file
edited by hand or left by an older version is one clear ``DataError`` naming the file and the field, not a
``KeyError`` deep in the report. The models declare the fields the pipeline relies on; stages may add more
(kept as they are: ``extra="allow"``), so the models are the contract, not a copy of every key. The JSON
Schemas in ``docs/schemas/`` are exported from these models (``python -m domainbert.core.artifact_types
docs/schemas``) for users who read the files from other tools; a test keeps them in step.
This module computes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domainbert.core.errors import DataError

SCHEMA_VERSION = 1
Scores = dict[str, Any]  # metric name -> value (NER also holds per_type: {type: {precision, recall, f1, support}})


class Artifact(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(SCHEMA_VERSION, description="Bumped when a declared field changes meaning.")


class FilterCounts(BaseModel):
    model_config = ConfigDict(extra="allow")

    dropped: int = Field(ge=0)
    reasons: dict[str, int] = Field(default_factory=dict)


class SkippedLines(BaseModel):
    total: int = Field(ge=0, description="Malformed lines skipped (over-large documents are listed, not counted).")
    by_source: dict[str, dict[str, int]]


class CorpusManifest(Artifact):
    """``corpus/manifest.json``."""

    domain: str
    profile: str
    documents_in: int = Field(ge=0, description="Documents read from all sources.")
    documents_out: int = Field(ge=0, description="Documents in the finished corpus.")
    documents: dict[str, int] = Field(description="Documents per split and 'total'.")
    words: dict[str, int]
    bytes: dict[str, int]
    estimated_tokens: dict[str, int]
    sources: dict[str, dict[str, int]] = Field(description="Per source: documents_in, documents, words, bytes, ...")
    filters: dict[str, FilterCounts] = Field(description="Per filter (versioned name): documents dropped and why.")
    dedup: dict[str, Any]
    decontamination: dict[str, Any]
    audit: dict[str, Any] | None = Field(None, description="The independent leakage audit of the finished corpus.")
    malformed_lines: SkippedLines
    shards: dict[str, int]
    content_hash: str


class VocabReport(Artifact):
    """``vocab/report.json``."""

    domain: str
    profile: str
    tokenizer: dict[str, Any] = Field(description="kind, vocab_size (achieved), requested size, lowercase, ...")
    overlap: dict[str, Any] = Field(description="Per reference: the domain vocabulary's overlap with it.")
    recommendation: dict[str, Any] = Field(description="decision (continue, extend, scratch) and its reasons.")
    extension: dict[str, Any] | None = None
    heldout: dict[str, Any] = Field(description="Fertility and unknown rate of each tokenizer on held-out text.")


class PretrainSummary(Artifact):
    """``pretrain/<arm>/summary.json``."""

    arm: str
    source: str = Field(description="What the arm started from.")
    steps: int = Field(ge=0)
    planned_steps: int = Field(ge=0)
    budget_tokens: int = Field(ge=0)
    tokens_consumed: int = Field(ge=0)
    lr: float = Field(gt=0)
    warmup_ratio: float = Field(ge=0)
    precision: str
    engine: str
    world_size: int = Field(ge=1)
    final_loss: float | None
    loss_curve: list[list[float]] = Field(description="[step, loss] pairs.")
    domain_perplexity_before: float | None
    domain_perplexity: float | None
    unigram_perplexity: float | None = Field(
        None, description="The domain set under a unigram model of the training split (pretrain.evaluation)."
    )
    general_perplexity_before: float | None
    general_perplexity: float | None
    wall_seconds: float = Field(ge=0)
    vocab_size: int = Field(ge=1)
    parameters: dict[str, int]


class BaseWarmupSummary(Artifact):
    """``pretrain/base-warmup/summary.json``: the general masked-LM warm-up of a base without an MLM head."""

    train: Literal["head", "full"] = Field(description="What trained: the MLM head alone, or the whole encoder.")
    steps: int = Field(ge=0)
    tokens: int = Field(ge=0)
    converged: bool = Field(description="Whether the general perplexity stopped improving before the last step.")
    wall_seconds: float = Field(ge=0)
    from_machine_cache: bool = Field(description="Served from this machine's cache rather than trained here.")
    trainable_parameters: int = Field(ge=0)
    domain_perplexity_random_head: float | None
    domain_perplexity: float | None
    general_perplexity_random_head: float | None
    general_perplexity: float | None


def replaced_token_detection(summary: dict[str, Any] | None) -> bool:
    """Whether an arm's ``summary.json`` is of replaced-token detection: its perplexities are its (new)
    generator's, not its encoder's, and its loss is the generator's plus the weighted detection loss."""
    return summary is not None and summary.get("objective") == "rtd"


class FinetuneResult(Artifact):
    """``finetune/<model>/<task>/seed-<n>/result.json`` (the floor's too: model ``floor``, seed 0)."""

    model: str
    model_ref: str
    mode: Literal["finetune", "frozen", "floor"]
    task: str
    task_type: Literal["ner", "classification"]
    multi_label: bool = False
    seed: int
    primary_metric: str
    num_examples: dict[str, int]
    validation: Scores
    test: Scores
    gold: list[Any] = Field(description="Test answers in file order (a tag list per sentence for NER).")
    pred: list[Any]
    collapse: dict[str, Any]
    collapsed: bool
    retry: dict[str, Any] | None = None
    lr: float | None = None
    split_overlap: dict[str, Any] | None = Field(
        None, description="Validation/test examples also in train ({split: {exact, normalised}}) and 'excluded'."
    )
    wall_seconds: float = Field(ge=0)


ARTIFACTS: dict[str, type[Artifact]] = {
    "corpus-manifest": CorpusManifest,
    "vocab-report": VocabReport,
    "base-warmup-summary": BaseWarmupSummary,
    "pretrain-summary": PretrainSummary,
    "finetune-result": FinetuneResult,
}
A = TypeVar("A", bound=Artifact)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"


def validate_artifact(kind: type[A], data: dict[str, Any], path: Path | str | None = None) -> A:
    """``data`` as ``kind``; a missing or mistyped field is a ``DataError`` naming the file and the field."""
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        raise DataError(f"not a valid {kind.__name__}: {_first_error(exc)}", file=path) from None


def dump_artifact(kind: type[A], data: dict[str, Any], path: Path | str | None = None) -> str:
    """The JSON text of ``data`` checked as ``kind`` (``schema_version`` included), ready to write."""
    model = validate_artifact(kind, data, path)
    return json.dumps(model.model_dump(mode="json"), indent=1) + "\n"


def load_artifact(kind: type[A], path: Path) -> dict[str, Any] | None:
    """The artifact at ``path`` checked as ``kind`` (None when the file does not exist), as a plain dict.

    Raises:
        DataError: not JSON, a newer ``schema_version`` than this version reads, or a field that does not fit.
    """
    if not Path(path).is_file():
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg})", file=path, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise DataError(f"not a valid {kind.__name__}: a JSON object was expected", file=path)
    if int(data.get("schema_version", SCHEMA_VERSION)) > SCHEMA_VERSION:
        raise DataError(
            f"written by a newer domainbert (schema_version {data['schema_version']}, this version "
            f"reads {SCHEMA_VERSION}); upgrade to read it",
            file=path,
        )
    return validate_artifact(kind, data, path).model_dump(mode="json")


def export_schemas(folder: Path) -> list[Path]:
    """Write ``<name>.schema.json`` for every artifact into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, kind in ARTIFACTS.items():
        path = folder / f"{name}.schema.json"
        path.write_text(json.dumps(kind.model_json_schema(), indent=2, sort_keys=True) + "\n")
        out.append(path)
    return out


if __name__ == "__main__":
    for written in export_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(written)
