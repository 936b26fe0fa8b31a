"""Chunk and pool (a task's ``chunks``): long texts cut into windows that are encoded on their own and pooled
together, the same logits after saving, the settings it needs, and a label only a later window holds learnt."""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

import pytest
import torch

from domainbert.core.errors import ConfigError
from domainbert.core.paths import RunLayout
from domainbert.finetune.classification import encode_classification
from domainbert.finetune.jobs import Job, run_record
from domainbert.finetune.pooling import MeanPoolClassifier
from domainbert.finetune.stage import finetune_one
from domainbert.task_data.splits import ClsExample
from support.finetune import make_cfg

FILLER = "the a of and to is in for on with data program file system code user".split()


@pytest.fixture
def tok(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


@pytest.fixture
def classifier(tiny_bert) -> MeanPoolClassifier:
    from transformers import AutoModel

    torch.manual_seed(0)
    return MeanPoolClassifier(AutoModel.from_pretrained(tiny_bert), 2).eval()


def _example(text: str) -> ClsExample:
    return ClsExample(text=text, labels=["a"])


def test_a_long_text_becomes_windows_each_with_its_special_tokens(tok):
    words = [FILLER[i % len(FILLER)] for i in range(20)]  # one token each
    ids = tok(" ".join(words), add_special_tokens=False)["input_ids"]
    [feat] = encode_classification([_example(" ".join(words))], tok, {"a": 0}, 8, False, chunks=3)
    windows = [feat["input_ids"][i : i + 8] for i in range(0, 24, 8)]
    assert len(feat["input_ids"]) == 24 and len(feat["attention_mask"]) == 24
    assert all(w[0] == tok.cls_token_id and w[-1] == tok.sep_token_id for w in windows)
    assert [t for w in windows for t in w[1:-1]] == ids[:18]  # the first 3 x 6 tokens, in order
    [plain] = encode_classification([_example(" ".join(words))], tok, {"a": 0}, 8, False)
    assert plain["input_ids"] == windows[0]  # one window is what truncation gives
    [short] = encode_classification([_example("the data")], tok, {"a": 0}, 8, False, chunks=3)
    assert short["input_ids"] == tok("the data")["input_ids"]


def test_a_text_past_its_windows_is_marked_cut_and_one_that_fits_is_not(tok):
    """What the run records as ``cut_by_window``: 18 tokens fill three windows of 6 exactly, 19 do not."""
    texts = [" ".join(FILLER[i % len(FILLER)] for i in range(n)) for n in (6, 7, 18, 19)]
    one = encode_classification([_example(t) for t in texts], tok, {"a": 0}, 8, False)
    three = encode_classification([_example(t) for t in texts], tok, {"a": 0}, 8, False, chunks=3)
    assert [f["cut"] for f in one] == [False, True, True, True]
    assert [f["cut"] for f in three] == [False, False, False, True]
    assert [f["input_ids"] for f in one] == [tok(t, truncation=True, max_length=8)["input_ids"] for t in texts]


def test_each_window_is_encoded_alone_and_all_are_pooled(classifier):
    first = torch.tensor([[2, 11, 12, 13, 14, 15, 16, 3]])
    last = torch.tensor([[2, 17, 18, 3]])
    hidden = torch.cat([classifier.encoder(input_ids=w).last_hidden_state[0] for w in (first, last)])
    expected = classifier.classifier(hidden.mean(0, keepdim=True))
    classifier.chunk_length = 8
    row = torch.cat([first, last], 1)
    assert torch.allclose(classifier(input_ids=row).logits, expected, atol=1e-5)
    # in a batch with a short text: padding (a window of padding alone too) changes neither row's logits
    short = torch.tensor([[2, 19, 3]])
    batch = torch.zeros(2, 16, dtype=torch.long)
    mask = torch.zeros(2, 16, dtype=torch.long)
    batch[0, :12], mask[0, :12] = row[0], 1
    batch[1, :3], mask[1, :3] = short[0], 1
    logits = classifier(input_ids=batch, attention_mask=mask).logits
    assert torch.allclose(logits[0], expected[0], atol=1e-5)
    assert torch.allclose(logits[1], classifier(input_ids=short).logits[0], atol=1e-5)


def test_chunks_need_single_text_classification_and_mean_pooling(tiny_bert, tmp_path):
    tasks = _long_task(tmp_path / "tasks", n=(4, 2, 2))
    with pytest.raises(ConfigError, match="pooling must be 'mean'"):
        _cfg(tiny_bert, tasks, 2, "finetune.pooling=cls")
    ner = {"name": "n", "type": "ner", "format": "conll", "path": str(tmp_path), "labels": ["O"], "chunks": 2}
    with pytest.raises(ConfigError, match="classification of single texts only"):
        make_cfg(tiny_bert, tmp_path, "finetune.tasks=" + json.dumps([ner]))


def _long_task(root: Path, n: tuple[int, int, int] = (64, 16, 16)) -> Path:
    """The label is the text's last word ('compiler' or 'memory'), after 10 filler words: past the first window
    of 8 tokens (6 of text), inside the second."""
    rng = random.Random(0)
    root.mkdir(parents=True)
    for split, count in zip(("train", "validation", "test"), n, strict=True):
        with gzip.open(root / f"{split}.jsonl.gz", "wt") as f:
            for i in range(count):
                label = ["tech", "plain"][i % 2]
                words = [rng.choice(FILLER) for _ in range(10)] + ["compiler" if label == "tech" else "memory"]
                f.write(json.dumps({"id": f"{split}-{i}", "text": " ".join(words), "label": label}) + "\n")
    return root


def _cfg(tiny_bert: Path, folder: Path, chunks: int, *extra: str):
    task = {"name": "long", "type": "classification", "format": "jsonl", "path": str(folder),
            "labels": ["tech", "plain"], "chunks": chunks}
    return make_cfg(tiny_bert, folder, "finetune.tasks=" + json.dumps([task]), "finetune.max_length=8",
                    "finetune.epochs=6", "finetune.pooling=mean", *extra)


def test_a_label_past_the_first_window_is_learnt_only_with_chunks(tmp_path, tiny_bert, monkeypatch):
    import transformers.dynamic_module_utils as dmu
    from transformers import AutoModelForSequenceClassification

    folder = _long_task(tmp_path / "tasks")
    one, two = _cfg(tiny_bert, folder, 1), _cfg(tiny_bert, folder, 2, "finetune.save_models=true")
    job = Job("base", str(tiny_bert), "long", 1, "finetune")
    assert run_record(one, job)[2] != run_record(two, job)[2]  # a result knows how its texts were read
    layout = RunLayout(tmp_path / "run")
    truncated = finetune_one(one, layout, "base", str(tiny_bert), "long", 1)
    layout = RunLayout(tmp_path / "run2")
    chunked = finetune_one(two, layout, "base", str(tiny_bert), "long", 1)
    assert truncated["test"]["accuracy"] <= 0.75 < 0.95 <= chunked["test"]["accuracy"]
    # the saved model pools the same windows: the same answers through transformers' Auto class
    monkeypatch.setattr(dmu, "HF_MODULES_CACHE", str(tmp_path / "hf-modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    saved = AutoModelForSequenceClassification.from_pretrained(
        layout.finetune("base", "long", 1) / "model", trust_remote_code=True).eval()
    assert saved.config.chunk_length == 8
    from transformers import AutoTokenizer

    texts = [json.loads(line)["text"] for line in gzip.open(folder / "test.jsonl.gz", "rt")]
    feats = encode_classification([_example(t) for t in texts], AutoTokenizer.from_pretrained(tiny_bert),
                                  {"a": 0}, 8, False, chunks=2)
    with torch.no_grad():
        pred = [saved.config.id2label[int(saved(input_ids=torch.tensor([f["input_ids"]])).logits.argmax())]
                for f in feats]
    assert pred == chunked["pred"]
