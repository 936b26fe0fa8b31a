"""The configuration reference (docs/configuration.md) is generated from the config models and kept current."""

from __future__ import annotations

from pathlib import Path

from domainbert.config.reference import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_reference_on_disk_is_what_the_models_generate():
    assert DOC.read_text(encoding="utf-8") == render(), "stale: run python -m domainbert.config.reference docs/configuration.md"


def test_every_key_has_a_type_a_default_and_a_description():
    rows = [line for line in render().splitlines() if line.startswith("| `")]
    assert len(rows) > 150
    for row in rows:
        key, kind, default, description = (cell.strip() for cell in row.strip("|").split(" | ", 3))
        assert kind and default and description.strip(" |"), row
    keys = {row.split("`")[1] for row in rows}
    for expected in ("pretrain.tapt.epochs", "finetune.tasks[].chunks", "corpus.sources[].paths",
                     "pretrain.base_warmup.steps", "finetune.only_tasks", "tracking.report_to"):
        assert expected in keys, expected
