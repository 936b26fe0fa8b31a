"""Scores per group (``group_field``): each group's score from a result's answers, against values worked by
hand, the task reader's group column, and the section on the shipped multilingual task."""

from __future__ import annotations

import gzip
import json

import pytest

from domainbert.config.domain import load_domain
from domainbert.config.finetune import TaskConfig
from domainbert.core.errors import DataError
from domainbert.report.groups import group_scores, groups_section
from domainbert.report.inputs import RunArtifacts
from domainbert.task_data.splits import load_task

TASK = TaskConfig(name="t", type="classification", format="jsonl", path=".", labels=["neg", "pos"])


def test_each_group_is_scored_on_its_own_answers():
    groups = ["en", "en", "en", "en", "ru", "ru"]
    gold = ["pos", "pos", "neg", "neg", "pos", "neg"]
    right = {"model": "base", "seed": 1, "primary_metric": "macro_f1", "gold": gold,
             "pred": ["pos", "pos", "neg", "neg", "neg", "pos"]}  # en all right, ru all wrong
    scores, skipped = group_scores(TASK, groups, gold, ["neg", "pos"], [right])
    assert scores["base"]["en"] == [1.0] and scores["base"]["ru"] == [0.0] and not skipped
    # en: 3 of 4 right, "pos" predicted everywhere: F1(pos) = 2*(2/3*1)/(2/3+1) = 0.8, F1(neg) = 2/3; mean 11/15
    half = {**right, "seed": 2, "pred": ["pos", "pos", "pos", "neg", "pos", "neg"]}
    scores, _ = group_scores(TASK, groups, gold, ["neg", "pos"], [right, half])
    assert scores["base"]["en"] == pytest.approx([1.0, 11 / 15]) and scores["base"]["ru"] == [0.0, 1.0]
    short = {**right, "seed": 3, "gold": gold[:5], "pred": gold[:5]}
    other = {**right, "seed": 4, "gold": gold[::-1]}  # as many answers, another split's: not credited to groups
    assert group_scores(TASK, groups, gold, ["neg", "pos"], [short, other])[1] == ["base seed 3", "base seed 4"]


def test_the_reader_takes_the_group_column_and_names_the_line_without_it(tmp_path):
    for split in ("train", "validation", "test"):
        rows = [{"text": "good day", "label": "pos", "lang": "en"}, {"text": "bom dia", "label": "neg", "lang": "pt"}]
        if split == "test":
            rows.append({"text": "no language", "label": "pos"})
        with gzip.open(tmp_path / f"{split}.jsonl.gz", "wt") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    task = TASK.model_copy(update={"path": str(tmp_path), "group_field": "lang"})
    with pytest.raises(DataError, match=r"column 'lang' is missing") as err:
        load_task(task)
    assert "test.jsonl.gz" in str(err.value) and ":3" in str(err.value)
    (tmp_path / "test.jsonl.gz").write_bytes((tmp_path / "train.jsonl.gz").read_bytes())
    assert [ex.group for ex in load_task(task).splits["test"]] == ["en", "pt"]
    with pytest.raises(ValueError, match="classification tasks only"):
        TaskConfig(name="n", type="ner", format="conll", path=".", labels=["O"], group_field="lang")


def test_the_shipped_multilingual_task_gets_a_table_per_language(tmp_path):
    cfg = load_domain("tweets", profile="multilingual")
    task = cfg.finetune.tasks[0]
    from domainbert.finetune.jobs import load_task_data

    test = load_task_data(cfg, task).splits["test"]
    gold = [ex.labels[0] for ex in test]
    results = [{"model": m, "seed": s, "task": task.name, "primary_metric": "macro_f1", "gold": gold,
                "pred": gold if m == "base" else ["positive"] * len(gold)} for m in ("base", "floor") for s in (1, 2)]
    section = groups_section(cfg, RunArtifacts(root=tmp_path, finetune=results))
    [table] = section.blocks
    assert table.headers == ["lang", "test examples", "floor", "base"]
    # the largest group first; French and Russian have under 30 test examples each
    assert table.rows[0][0] == "en" and {row[0] for row in table.rows} == {
        "en", "pt", "es", "ar", "fr (too few to compare)", "ru (too few to compare)"}
    assert sum(int(row[1].split()[0]) for row in table.rows) == len(test)
    assert all(row[3] == "100.0 ± 0.0" for row in table.rows)  # every answer right, in every language
    assert groups_section(load_domain("tweets"), RunArtifacts(root=tmp_path)) is None  # no group_field
