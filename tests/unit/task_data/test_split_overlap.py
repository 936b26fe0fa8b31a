"""Examples shared between a task's splits: counted exactly and after decontamination's normalisation, and
left out of the evaluation splits; the shipped tasks are checked as they are."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from domainbert.config.finetune import TaskConfig
from domainbert.task_data.split_overlap import find_overlap, normalised, without_overlap
from domainbert.task_data.splits import example_texts, load_task
from reference.words import words_of

ROOT = Path(__file__).resolve().parents[3]


def _cls_task(folder: Path, train: list[tuple[str, str]], test: list[tuple[str, str]],
              validation: list[tuple[str, str]] | None = None) -> TaskConfig:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in (("train", train), ("validation", train[:3] if validation is None else validation),
                        ("test", test)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    return TaskConfig(name="cls", type="classification", format="jsonl", path=str(folder), labels=["a", "b"])


def test_the_normalisation_is_decontaminations_word_rule():
    texts = ["Hello,  World!", "C++ and C# are 2 languages", "naïve café — déjà vu", "x_y z\tq\n"]
    for text in texts:
        assert normalised(text).split() == words_of(text)


def test_a_test_split_copied_from_train_is_found_and_left_out(tmp_path):
    rng = random.Random(0)
    train = [(f"example number {i} about topic {rng.randint(0, 9)}", "ab"[i % 2]) for i in range(40)]
    copies = [train[i] for i in range(10)]  # verbatim
    variants = [(train[i][0].upper() + "!!", train[i][1]) for i in range(10, 14)]  # same words, other case
    fresh = [(f"a new sentence {i}", "a") for i in range(6)]
    data = load_task(_cls_task(tmp_path / "t", train, copies + variants + fresh))
    overlap = find_overlap(data)
    assert overlap.exact["test"] == 10 and overlap.normalised["test"] == 14
    assert overlap.normalised["validation"] == 3  # the validation split is train's first three
    assert overlap.any and "test 14 of 20 (10 verbatim)" in overlap.sentence("cls", {"validation": 3, "test": 20})
    kept = without_overlap(data, overlap)
    assert [e.text for e in kept.splits["test"]] == [t for t, _ in fresh]
    assert kept.splits["train"] == data.splits["train"]
    # a split that would be left empty keeps its examples (validation is all copies here)
    assert kept.splits["validation"] == data.splits["validation"]


def test_disjoint_splits_share_nothing(tmp_path):
    train = [(f"train text {i}", "a") for i in range(10)]
    test = [(f"test text {i}", "b") for i in range(5)]
    validation = [(f"validation text {i}", "a") for i in range(3)]
    overlap = find_overlap(load_task(_cls_task(tmp_path / "t", train, test, validation)))
    assert overlap.normalised["test"] == 0 and not overlap.any


@pytest.mark.parametrize("domain", ["science", "economics", "law", "tweets"])
def test_shipped_tasks_are_checked(domain):
    from domainbert.config.domain import load_domain

    for task in load_domain(domain, []).finetune.tasks:
        data = load_task(task)
        overlap = find_overlap(data)
        # the counts agree with a direct recount of the normalised texts
        train = {tuple(normalised(t) for t in example_texts(e)) for e in data.splits["train"]}
        for split in ("validation", "test"):
            assert overlap.normalised[split] == sum(tuple(normalised(t) for t in example_texts(e)) in train
                                                    for e in data.splits[split])
