"""A finished result whose bytes no longer match its record (edited, truncated) is not current: the report
leaves it out and names it, ``plan`` counts it as damaged, and fine-tuning recomputes it."""

from __future__ import annotations

import json

from domainbert.core.paths import RunLayout
from domainbert.finetune.matrix import finetune_all
from domainbert.finetune.stage import expected_results
from domainbert.report.compare import render_report
from support.finetune import make_cfg


def test_an_edited_or_truncated_result_is_left_out_named_and_recomputed(tmp_path, tiny_bert, tasks_dir, caplog):  # noqa: F811
    one_task = "finetune.tasks=" + json.dumps(
        [
            {
                "name": "cls",
                "type": "classification",
                "format": "jsonl",
                "path": str(tasks_dir / "cls"),
                "labels": ["tech", "plain"],
            }
        ]
    )
    cfg = make_cfg(
        tiny_bert,
        tasks_dir,
        one_task,
        "pretrain.arms=[continued]",
        "finetune.only_models=[base]",
        "finetune.seeds=[1, 2]",
        "finetune.epochs=1",
    )
    layout = RunLayout(tmp_path / "run")
    finetune_all(cfg, layout)
    edited, truncated = (layout.finetune("base", "cls", seed) / "result.json" for seed in (1, 2))
    original = json.loads(edited.read_text())
    tampered = {**original, "test": {**original["test"], "f1": 0.999}}
    edited.write_text(json.dumps(tampered))
    truncated.write_text(truncated.read_text()[:50])
    states = {(e["model"], e["seed"]): e["state"] for e in expected_results(cfg, layout)}
    assert states == {("floor", 0): "current", ("base", 1): "damaged", ("base", 2): "damaged"}
    assert f"{edited}: damaged" in caplog.text and f"{truncated}: damaged" in caplog.text
    render_report(cfg, layout)  # neither published nor a JSONDecodeError
    md = (layout.report / "report.md").read_text()
    assert "Results: 1 of the 3 this config asks for" in md
    assert (
        "left out as damaged (changed since written; fine-tuning recomputes them): base/cls/seed-1, base/cls/seed-2"
        in md
    )
    finetune_all(cfg, layout)
    assert {e["state"] for e in expected_results(cfg, layout)} == {"current"}
    assert json.loads(edited.read_text())["test"] == original["test"]
