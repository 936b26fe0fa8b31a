"""Decontamination reads evaluation texts through the fine-tuning task reader: every format and file name
fine-tuning accepts, all examples, pairs included; nothing is skipped without a trace."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from domainbert.config.finetune import TaskConfig
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.corpus.build import build_corpus
from domainbert.corpus.decontaminate import eval_texts
from domainbert.corpus.store import iter_documents
from domainbert.task_data.splits import load_task, split_texts

CONLL = "-DOCSTART-\tO\n\nLisp\tB-TERM\nis\tO\nold\tO\n\nunix\tB-TERM\nfile\tI-TERM\n"


def _csv(path, rows):
    with (gzip.open(path, "wt", newline="") if path.name.endswith(".gz") else open(path, "w", newline="")) as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def csv_task(tmp_path, **kw) -> TaskConfig:
    folder = tmp_path / "csv-task"
    folder.mkdir()
    rows = {split: [{"sentence": f"{split} premise {i}, with a comma", "other": f"{split} hypothesis {i}",
                     "label": "yes" if i % 2 else "no"} for i in range(5)] for split in ("train", "dev", "test")}
    _csv(folder / "train.csv", rows["train"])
    _csv(folder / "dev.csv", rows["dev"])
    _csv(folder / "test.csv.gz", rows["test"])
    return TaskConfig(name="nli", type="classification", format="csv", path=str(folder), labels=["yes", "no"],
                      text_field="sentence", text_pair_field="other", **kw)


def ner_task(tmp_path) -> TaskConfig:
    folder = tmp_path / "ner-task"
    folder.mkdir()
    (folder / "train.conll").write_text(CONLL)
    (folder / "dev.tsv").write_text("Haskell\tB-TERM\nis\tO\nlazy\tO\n\nthe\tO\nkernel\tB-TERM\n")
    (folder / "test.bio").write_text(CONLL)
    return TaskConfig(name="terms", type="ner", format="conll", path=str(folder), labels=["O", "B-TERM", "I-TERM"])


def test_csv_task_with_dev_file_gz_test_and_pairs(tmp_path):
    task = csv_task(tmp_path, max_eval_examples=2, max_test_examples=2)
    sets = eval_texts([task], ["validation", "test"])
    assert sets.sources == {"nli/validation": str(tmp_path / "csv-task" / "dev.csv"),
                            "nli/test": str(tmp_path / "csv-task" / "test.csv.gz")}
    # every example (max_eval_examples only subsamples fine-tuning), the text and its pair as two texts
    assert sets.texts["nli/validation"][:4] == ["dev premise 0, with a comma", "dev hypothesis 0",
                                                "dev premise 1, with a comma", "dev hypothesis 1"]
    assert len(sets.texts["nli/test"]) == 10 and not sets.not_checked


def test_ner_task_with_dev_tsv(tmp_path):
    sets = eval_texts([ner_task(tmp_path)], ["validation", "test"])
    assert sets.texts == {"terms/validation": ["Haskell is lazy", "the kernel"],
                          "terms/test": ["Lisp is old", "unix file"]}


def test_split_texts_are_what_fine_tuning_reads(tmp_path):
    """The texts checked against the corpus are exactly the ones load_task gives fine-tuning (no subsample)."""
    for task in (csv_task(tmp_path), ner_task(tmp_path)):
        data = load_task(task)
        for split in ("validation", "test"):
            source, texts = split_texts(task, split)
            assert source == data.sources[split]
            expected = [t for ex in data.splits[split] for t in
                        ([" ".join(ex.tokens)] if task.type == "ner" else [ex.text, ex.text_pair])]
            assert texts == expected


def test_missing_split_and_bad_line_are_errors(tmp_path):
    task = ner_task(tmp_path)
    (tmp_path / "ner-task" / "test.bio").unlink()
    with pytest.raises(DataError, match="ner-task: no test file"):
        eval_texts([task], ["validation", "test"])
    (tmp_path / "ner-task" / "test.conll").write_text("Lisp\tB-LANG\n")
    with pytest.raises(DataError, match=r"test\.conll:1: tag 'B-LANG'"):
        eval_texts([task], ["test"])
    folder = tmp_path / "jsonl"
    folder.mkdir()
    with gzip.open(folder / "test.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": "fine", "label": "a"}) + "\n{not json\n")
    task = TaskConfig(name="j", type="classification", format="jsonl", path=str(folder), labels=["a"])
    with pytest.raises(DataError, match=r"test\.jsonl\.gz:2: invalid JSON"):
        eval_texts([task], ["test"])
    (folder / "validation.jsonl").write_text("\n")
    with pytest.raises(DataError, match="validation split is empty"):
        eval_texts([task], ["validation"])


def test_hub_task_saved_to_disk_is_read(tmp_path):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                               "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-TERM", "I-TERM"]))})
    rows = {"tokens": [["the", "lexer", "runs"], ["a", "parser"]], "ner_tags": [[0, 1, 0], [0, 1]]}
    datasets.DatasetDict({s: datasets.Dataset.from_dict(rows, features=feats)
                          for s in ("train", "validation", "test")}).save_to_disk(str(tmp_path / "hub"))
    task = TaskConfig(name="h", type="ner", format="hf", path=str(tmp_path / "hub"), labels=["O", "B-TERM", "I-TERM"])
    sets = eval_texts([task], ["validation", "test"])
    assert sets.texts["h/test"] == ["the lexer runs", "a parser"] and not sets.not_checked
    assert sets.sources["h/validation"] == f"{tmp_path / 'hub'}[validation]"


def test_unreachable_hub_task_is_listed_not_skipped(tmp_path):
    task = TaskConfig(name="remote", type="classification", format="hf", path="nobody/no-such-dataset-xyz",
                      labels=["a"])
    sets = eval_texts([task], ["validation", "test"])
    assert set(sets.not_checked) == {"remote/validation", "remote/test"}
    assert "no-such-dataset-xyz" in sets.not_checked["remote/test"] and not sets.texts


def test_csv_and_dev_tsv_tasks_are_decontaminated_and_audited(tmp_path, small_domain):
    """The two tasks fine-tuning read but decontamination did not: their texts leave the corpus."""
    clean = [f"note {i} on caches, pages and the memory hierarchy of computers, at some length." for i in range(20)]
    leaked = ["Intro words here. dev premise 3, with a comma. dev hypothesis 3. More words after it.",
              "Haskell is lazy", "We know that Haskell is lazy. It is."]
    cfg = small_domain(clean + leaked, [csv_task(tmp_path), ner_task(tmp_path)], min_words=3)
    m = build_corpus(cfg, RunLayout(tmp_path / "run"))
    removed = m["decontamination"]["by_task_split"]
    assert removed["nli/validation"] == {"documents": 0, "sentences": 2}
    assert removed["terms/validation"] == {"documents": 1, "sentences": 2}
    texts = {d["text"] for split in ("train", "validation") for d in iter_documents(tmp_path / "run" / "corpus", split)}
    assert texts == set(clean) | {"Intro words here. More words after it.", "It is."}
    audit = m["audit"]["by_task_split"]
    assert set(audit) == {"nli/validation", "nli/test", "terms/validation", "terms/test"}
    assert audit["terms/validation"]["source"].endswith("dev.tsv") and m["audit"]["verbatim"] == 0
    assert audit["nli/validation"]["texts"] == 10 and audit["terms/validation"]["whole_document_texts"] == 1
