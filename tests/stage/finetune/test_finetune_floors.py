"""Floor baselines: TF-IDF + logistic regression and a CRF, on tiny generated tasks and small shipped subsets."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from domainbert.config.finetune import TaskConfig
from domainbert.finetune.floors import run_floor, word_shape
from domainbert.finetune.runner import gold_of
from domainbert.task_data.splits import load_task
from support.finetune import KEYWORDS, SIZES, filler, keyword_task, write_jsonl

TASKS = Path(__file__).resolve().parents[3] / "corpora" / "tasks"
def test_classification_keyword_task_is_solved(tmp_path):
    data = load_task(keyword_task(tmp_path))
    out = run_floor(data)
    assert out["test"]["macro_f1"] == 1.0 and out["test"]["accuracy"] == 1.0
    assert out["validation"]["macro_f1"] == 1.0
    assert out["gold"] == gold_of(data, "test") and len(out["pred"]) == SIZES["test"]
    assert out["train_examples"] == SIZES["train"] and out["num_parameters"] > 0
    assert out["history"] == [] and out["stopped_early"] is False and "logistic" in out["floor_method"]
    assert {"C", "class_weight"} == set(out["floor_params"]) and len(out["floor_search"]) == 8


def test_text_pair_words_are_features(tmp_path):
    cfg = keyword_task(tmp_path, pair=True)
    with_pair = run_floor(load_task(cfg))
    text_only = run_floor(load_task(cfg.model_copy(update={"text_pair_field": None})))
    assert with_pair["test"]["macro_f1"] >= 0.9  # only the pair's keyword can decide
    assert text_only["test"]["macro_f1"] < 0.6  # the text alone is noise


def test_multi_label_predicts_sorted_label_lists(tmp_path):
    """Each label has its keyword; the predictions are an independent one-vs-rest pipeline's, sorted."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import MultiLabelBinarizer

    rng = random.Random(1)
    labels = ["red", "green", "blue"]
    rows: dict[str, list[dict]] = {}
    for split, n in {**SIZES, "train": 300}.items():
        rows[split] = []
        for i in range(n):
            present = [lab for j, lab in enumerate(labels) if (i >> j) & 1] or ["red"]
            words = filler(rng, 3) + [k for k, v in KEYWORDS.items() if v in present]
            rng.shuffle(words)
            rows[split].append({"text": " ".join(words), "label": present})
    cfg = TaskConfig(name="ml", type="classification", format="jsonl", path=str(write_jsonl(tmp_path / "ml", rows)),
                     labels=labels, multi_label=True)
    data = load_task(cfg)
    out = run_floor(data)
    assert out["gold"] == gold_of(data, "test")
    assert all(p == sorted(p) and set(p) <= set(labels) for p in out["pred"])
    assert out["test"]["micro_f1"] >= 0.9 and out["test"]["macro_f1"] >= 0.9
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    mlb = MultiLabelBinarizer(classes=labels)
    ovr = OneVsRestClassifier(LogisticRegression(solver="newton-cg", max_iter=1000, **out["floor_params"]))
    ovr.fit(vec.fit_transform([ex.text for ex in data.splits["train"]]), mlb.fit_transform(
        [ex.labels for ex in data.splits["train"]]))
    hot = ovr.predict(vec.transform([ex.text for ex in data.splits["test"]]))
    assert [sorted(row) for row in mlb.inverse_transform(hot)] == out["pred"]
    assert out["num_parameters"] == len(labels) * (len(vec.vocabulary_) + 1)  # weights and intercept per label
    assert out["test"]["accuracy"] == sum(g == p for g, p in zip(out["gold"], out["pred"], strict=True)) / SIZES["test"]


def test_single_class_in_train_predicts_it(tmp_path):
    rows = {split: [{"text": f"word{i} data", "label": "red"} for i in range(5)] for split in SIZES}
    rows["test"][0]["label"] = "blue"
    cfg = TaskConfig(name="one", type="classification", format="jsonl", path=str(write_jsonl(tmp_path / "one", rows)),
                     labels=["red", "blue"])
    out = run_floor(load_task(cfg))
    assert out["pred"] == ["red"] * 5 and out["test"]["accuracy"] == 0.8


def ner_conll(rng: random.Random, n: int) -> str:
    """Sentences where 'called X Y' is a TERM and 'by Z' an ORG; Z and X come from open-ended made-up names."""
    lines = []
    for _ in range(n):
        sent = [(w, "O") for w in filler(rng, rng.randrange(2, 6))]
        name = [f"Zor{rng.randrange(1000)}", f"{rng.choice('KLMN')}ex{rng.randrange(100)}"][: rng.randrange(1, 3)]
        sent += [("called", "O")] + [(w, "B-TERM" if i == 0 else "I-TERM") for i, w in enumerate(name)]
        sent += [(w, "O") for w in filler(rng, rng.randrange(1, 4))]
        sent += [("by", "O"), (f"Acme{rng.randrange(1000)}", "B-ORG")] + [(w, "O") for w in filler(rng, 2)]
        lines.append("\n".join(f"{w}\t{t}" for w, t in sent) + "\n")
    return "\n".join(lines)


def ner_task(tmp_path: Path) -> TaskConfig:
    rng = random.Random(2)
    folder = tmp_path / "ner"
    folder.mkdir()
    for split, n in SIZES.items():
        (folder / f"{split}.conll").write_text(ner_conll(rng, n))
    return TaskConfig(name="ner", type="ner", format="conll", path=str(folder),
                      labels=["O", "B-TERM", "I-TERM", "B-ORG", "I-ORG"])


def valid_iob2(tags: list[str]) -> bool:
    prev = "O"
    for tag in tags:
        if tag.startswith("I-") and prev[2:] != tag[2:]:
            return False
        prev = tag
    return True


def test_ner_learnable_pattern_and_valid_iob2(tmp_path):
    data = load_task(ner_task(tmp_path))
    out = run_floor(data)
    assert out["test"]["f1"] >= 0.95
    assert set(out["test"]["per_type"]) == {"TERM", "ORG"}
    assert out["gold"] == gold_of(data, "test")
    assert [len(p) for p in out["pred"]] == [len(g) for g in out["gold"]]
    assert all(valid_iob2(p) for p in out["pred"])
    assert {"c1", "c2"} == set(out["floor_params"]) and out["num_parameters"] > 0 and "CRF" in out["floor_method"]


def test_floors_are_deterministic(tmp_path):
    for cfg in (keyword_task(tmp_path), ner_task(tmp_path)):
        a, b = run_floor(load_task(cfg)), run_floor(load_task(cfg))
        for out in (a, b):
            out.pop("train_seconds"), out.pop("train_cpu_seconds")
        assert a == b


def shipped(name: str, **kw) -> TaskConfig:
    if name == "science-subject":
        return TaskConfig(name=name, type="classification", format="jsonl", path=str(TASKS / name), **kw,
                          labels=["language", "networking", "programming", "hardware", "operating system",
                                  "company", "mathematics"])
    return TaskConfig(name=name, type="ner", format="conll", path=str(TASKS / name), labels=["O", "B-TERM", "I-TERM"],
                      **kw)


def test_classification_matches_an_independent_pipeline():
    """The chosen grid point refitted by hand on train reproduces the predictions; the score is sklearn's."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    data = load_task(shipped("science-subject", max_train_examples=150, max_eval_examples=80, max_test_examples=80))
    out = run_floor(data)
    assert 0.2 < out["test"]["macro_f1"] < 1.0  # a real, imperfect task: the comparisons below are not trivial
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    x = vec.fit_transform([ex.text for ex in data.splits["train"]])
    model = LogisticRegression(solver="newton-cg", max_iter=1000, **out["floor_params"])
    model.fit(x, [ex.labels[0] for ex in data.splits["train"]])
    assert list(model.predict(vec.transform([ex.text for ex in data.splits["test"]]))) == out["pred"]
    gold = [ex.labels[0] for ex in data.splits["test"]]
    assert out["test"]["macro_f1"] == pytest.approx(f1_score(gold, out["pred"], average="macro"))
    best = max(s["macro_f1"] for s in out["floor_search"])
    assert out["validation"]["macro_f1"] == best


def spans(rows: list[list[str]]) -> set[tuple[int, int, int, str]]:
    """(sentence, start, end, type) of every well-formed IOB2 entity."""
    out = set()
    for s, tags in enumerate(rows):
        start = None
        for i, tag in enumerate([*tags, "O"]):
            if start is not None and not (tag.startswith("I-") and tag[2:] == tags[start][2:]):
                out.add((s, start, i, tags[start][2:]))
                start = None
            if tag.startswith("B-"):
                start = i
    return out


def test_ner_f1_matches_an_independent_span_count():
    data = load_task(shipped("science-terms-ner", max_train_examples=150, max_eval_examples=100, max_test_examples=100))
    out = run_floor(data)
    gold, pred = spans(out["gold"]), spans(out["pred"])
    assert gold and pred and 0.0 < out["test"]["f1"] < 1.0
    assert out["test"]["precision"] == pytest.approx(len(gold & pred) / len(pred))
    assert out["test"]["recall"] == pytest.approx(len(gold & pred) / len(gold))


def test_word_shape():
    assert word_shape("Linux2.6") == "Xxd.d" and word_shape("TCP/IP") == "X/X" and word_shape("") == ""
