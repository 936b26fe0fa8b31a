"""Reading task files: CoNLL, JSONL and CSV; scheme conversion on read; clear errors on bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from domainbert.config.finetune import TaskConfig
from domainbert.core.errors import DataError
from domainbert.task_data.splits import load_task, subsample

CONLL = "-DOCSTART-\tO\n\nLisp\tB-TERM\nis\tO\na\tO\nlanguage\tB-TERM\n\nunix\tB-TERM\nfile\tI-TERM\n"


def ner_task(folder: Path, files: dict[str, str], **kw) -> TaskConfig:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    args = dict(name="t", type="ner", format="conll", path=str(folder), labels=["O", "B-TERM", "I-TERM"])
    args.update(kw)
    return TaskConfig(**args)


def test_conll_reads_sentences_and_skips_docstart(tmp_path):
    cfg = ner_task(tmp_path / "t", {"train.conll": CONLL, "dev.conll": CONLL, "test.txt": CONLL})
    data = load_task(cfg)
    assert [ex.tokens for ex in data.splits["train"]] == [["Lisp", "is", "a", "language"], ["unix", "file"]]
    assert data.splits["train"][1].tags == ["B-TERM", "I-TERM"]
    assert data.splits["validation"][0].where.endswith("dev.conll:3")
    assert data.label_list == ["O", "B-TERM", "I-TERM"]


def test_conll_bioes_is_converted(tmp_path):
    text = "a\tS-TERM\nb\tB-TERM\nc\tE-TERM\n"
    cfg = ner_task(tmp_path / "t", {f"{s}.conll": text for s in ("train", "validation", "test")},
                   labels=["O", "B-TERM", "I-TERM", "E-TERM", "S-TERM"], tag_scheme="BIOES")
    data = load_task(cfg)
    assert data.splits["test"][0].tags == ["B-TERM", "B-TERM", "I-TERM"]
    assert data.label_list == ["O", "B-TERM", "I-TERM"]


def test_tag_outside_label_set_names_file_and_line(tmp_path):
    bad = "Lisp\tB-TERM\nis\tB-LANG\n"
    cfg = ner_task(tmp_path / "t", {"train.conll": CONLL, "validation.conll": bad, "test.conll": CONLL})
    with pytest.raises(DataError, match=r"validation\.conll:2: tag 'B-LANG'"):
        load_task(cfg)


def test_token_without_tag_is_an_error(tmp_path):
    cfg = ner_task(tmp_path / "t", {"train.conll": "Lisp\tB-TERM\nis\n", "validation.conll": CONLL,
                                    "test.conll": CONLL})
    with pytest.raises(DataError, match=r"train\.conll:2: .*without a tag"):
        load_task(cfg)


def test_empty_split_and_missing_file(tmp_path):
    cfg = ner_task(tmp_path / "t", {"train.conll": CONLL, "validation.conll": "\n\n", "test.conll": CONLL})
    with pytest.raises(DataError, match="validation split is empty"):
        load_task(cfg)
    cfg = ner_task(tmp_path / "u", {"train.conll": CONLL, "validation.conll": CONLL})
    with pytest.raises(DataError, match="no test file"):
        load_task(cfg)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def test_jsonl_classification_and_missing_label_column(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    rows = [{"text": "a b", "label": "x"}, {"text": "c", "label": "y"}]
    for split in ("train", "validation"):
        write_jsonl(folder / f"{split}.jsonl.gz", rows)
    write_jsonl(folder / "test.jsonl.gz", rows + [{"text": "no label here"}])
    cfg = TaskConfig(name="c", type="classification", format="jsonl", path=str(folder), labels=["x", "y"])
    with pytest.raises(DataError, match=r"test\.jsonl\.gz:3: column 'label' is missing"):
        load_task(cfg)
    write_jsonl(folder / "test.jsonl.gz", rows + [{"text": "z", "label": "zz"}])
    with pytest.raises(DataError, match=r"test\.jsonl\.gz:3: label 'zz' is not in"):
        load_task(cfg)


def test_csv_multi_label_pairs(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    text = 'text,pair,label\n"one, two",other,x|y\nthree,four,y\n'
    for split in ("train", "validation", "test"):
        (folder / f"{split}.csv").write_text(text)
    cfg = TaskConfig(name="m", type="classification", format="csv", path=str(folder), labels=["x", "y"],
                     multi_label=True, text_pair_field="pair")
    data = load_task(cfg)
    first = data.splits["train"][0]
    assert (first.text, first.text_pair, first.labels) == ("one, two", "other", ["x", "y"])
    assert data.splits["train"][1].labels == ["y"]


def test_subsample_is_fixed_and_keeps_order():
    items = list(range(100))
    a = subsample(items, 10, seed=0)
    assert a == subsample(items, 10, seed=0) and a == sorted(a) and len(set(a)) == 10
    assert subsample(items, 200, seed=0) == items


def test_hf_dataset_with_classlabel_tags_and_length_mismatch(tmp_path):
    import datasets

    feats = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                               "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-TERM", "I-TERM"]))})
    rows = {"tokens": [["unix", "file", "is"], ["lisp"]], "ner_tags": [[1, 2, 0], [1]]}
    dd = datasets.DatasetDict({s: datasets.Dataset.from_dict(rows, features=feats) for s in ("train", "validation", "test")})
    dd.save_to_disk(str(tmp_path / "hf"))
    cfg = TaskConfig(name="h", type="ner", format="hf", path=str(tmp_path / "hf"), labels=["O", "B-TERM", "I-TERM"])
    data = load_task(cfg)
    assert data.splits["test"][0].tags == ["B-TERM", "I-TERM", "O"]
    bad = {"tokens": [["unix", "file"]], "ner_tags": [[1]]}
    dd["test"] = datasets.Dataset.from_dict(bad, features=feats)
    dd.save_to_disk(str(tmp_path / "hf2"))
    with pytest.raises(DataError, match=r"test\]:0: 2 tokens but 1 tags"):
        load_task(cfg.model_copy(update={"path": str(tmp_path / "hf2")}))
