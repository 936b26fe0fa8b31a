"""Typed artifacts: a bad field is one DataError naming file and field; the exported JSON Schemas stay in step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domainbert.core.artifact_types import (
    ARTIFACTS,
    SCHEMA_VERSION,
    BaseWarmupSummary,
    FinetuneResult,
    dump_artifact,
    load_artifact,
)
from domainbert.core.errors import DataError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "schemas"
RESULT = {"model": "base", "model_ref": "package:x", "mode": "finetune", "task": "t", "task_type": "ner", "seed": 1,
          "primary_metric": "f1", "num_examples": {"train": 3}, "validation": {"f1": 0.5}, "test": {"f1": 0.4},
          "gold": [["O"]], "pred": [["O"]], "collapse": {"collapsed": False}, "collapsed": False,
          "wall_seconds": 1.0, "history": [{"step": 1}]}


def test_exported_schemas_match_the_models():
    for name, kind in ARTIFACTS.items():
        on_disk = json.loads((DOCS / f"{name}.schema.json").read_text())
        assert on_disk == kind.model_json_schema(), f"run: python -m domainbert.core.artifact_types docs/schemas ({name})"


def test_round_trip_keeps_extra_fields_and_adds_the_schema_version(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(dump_artifact(FinetuneResult, RESULT, path))
    back = load_artifact(FinetuneResult, path)
    assert back == {**RESULT, "schema_version": SCHEMA_VERSION, "multi_label": False, "retry": None, "lr": None,
                    "split_overlap": None}


@pytest.mark.parametrize("change,field", [({"seed": "one"}, "seed"), ({"task_type": "qa"}, "task_type"),
                                          ({"test": None}, "test")])
def test_a_field_that_does_not_fit_names_file_and_field(tmp_path, change, field):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**RESULT, **change}))
    with pytest.raises(DataError) as err:
        load_artifact(FinetuneResult, path)
    assert str(path) in str(err.value) and f"FinetuneResult: {field}" in str(err.value)
    with pytest.raises(DataError, match=f"FinetuneResult: {field}"):
        dump_artifact(FinetuneResult, {**RESULT, **change})  # the writer refuses it too


def test_a_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**RESULT, "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(DataError, match="newer domainbert"):
        load_artifact(FinetuneResult, path)
    assert load_artifact(FinetuneResult, tmp_path / "absent.json") is None


def test_a_damaged_warm_up_summary_is_one_error_naming_file_and_field(tmp_path):
    """The report and the cards read the base warm-up's summary: a field it lacks is named, not a KeyError later."""
    warm = {"train": "full", "steps": 200, "tokens": 409600, "converged": False, "wall_seconds": 187.0,
            "from_machine_cache": False, "trainable_parameters": 22_713_216, "domain_perplexity_random_head": 5e4,
            "domain_perplexity": 4700.1, "general_perplexity_random_head": 4.6e4, "general_perplexity": 354.8}
    path = tmp_path / "summary.json"
    path.write_text(dump_artifact(BaseWarmupSummary, warm, path))
    assert load_artifact(BaseWarmupSummary, path) == {**warm, "schema_version": SCHEMA_VERSION}
    path.write_text(json.dumps({k: v for k, v in warm.items() if k != "converged"}))
    with pytest.raises(DataError) as err:
        load_artifact(BaseWarmupSummary, path)
    assert str(path) in str(err.value) and "BaseWarmupSummary: converged" in str(err.value)
