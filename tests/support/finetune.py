"""Builders of the fine-tuning tests: a random 2-layer hidden-128 BERT with a WordPiece vocabulary written here,
two tiny tasks (NER and classification) and the science domain over them, a bare classifier with token ids for
the training loop, predictions the way a transformers user gets them, and a keyword task for the floors.
Not a test module."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import torch

from domainbert.config.domain import load_domain
from domainbert.config.finetune import TaskConfig
from domainbert.task_data.tag_schemes import to_iob2

WORDS = ("the a of and to is in for on with data program language compiler memory network file system unix "
         "lisp code computer process protocol server user term function object type list string").split()
PIECES = ["##s", "##ed", "##ing", "##er", "##ly", "##x", "##y", "##z"]


def write_vocab(path: Path) -> Path:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?()-\"'")
    vocab = specials + WORDS + PIECES + chars + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    path.write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    return path


def build_tiny_bert(folder: Path, *, tokenizer: bool = True) -> Path:
    """Save a random-init 2-layer hidden-128 BERT (and its tokenizer) to ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = write_vocab(folder.parent / f"{folder.name}-vocab.txt")
    vocab = {w: i for i, w in enumerate(vocab_file.read_text().split("\n")) if w}
    # Built from a tokenizers object: BertTokenizerFast(vocab_file=...) silently gives all-[UNK] here.
    tk = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok = BertTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]", do_lower_case=True)
    config = BertConfig(vocab_size=len(tok), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    if tokenizer:
        tok.save_pretrained(folder)
    return folder


TERMS = ["lisp", "unix", "compiler", "memory", "xyzzy"]
OTHER = ["the", "a", "of", "and", "is", "in", "for", "with", "data", "user"]


def ner_sentence(rng: random.Random) -> list[tuple[str, str]]:
    """Tags follow word identity: each TERMS word is a one-word TERM entity (never two in a row).

    "xyzzy" splits into several sub-tokens, so alignment to the first one matters.
    """
    out, prev = [], "O"
    for _ in range(rng.randint(3, 9)):
        word = rng.choice(TERMS) if prev == "O" and rng.random() < 0.35 else rng.choice(OTHER)
        tag = "B-TERM" if word in TERMS else "O"
        out.append((word, tag))
        prev = tag
    return out


def write_tasks(root: Path) -> Path:
    """A tiny NER task (``ner``) and a tiny classification task (``cls``) under ``root``."""
    rng = random.Random(0)
    (root / "ner").mkdir()
    (root / "cls").mkdir()
    for split, n in (("train", 64), ("validation", 16), ("test", 16)):
        sents = [ner_sentence(rng) for _ in range(n)]
        (root / "ner" / f"{split}.conll").write_text("\n".join("\n".join(f"{w}\t{t}" for w, t in s) + "\n" for s in sents))
        with gzip.open(root / "cls" / f"{split}.jsonl.gz", "wt") as f:
            for i in range(n):
                label = ["tech", "plain"][i % 2]
                words = [rng.choice(TERMS if label == "tech" else OTHER) for _ in range(rng.randint(3, 8))]
                f.write(json.dumps({"id": f"{split}-{i}", "text": " ".join(words), "label": label}) + "\n")
    return root


def cfg_overrides(model: Path, tasks_dir: Path, *extra: str) -> list[str]:
    """The science domain's overrides for a tiny model on the two tiny tasks (and the CLI's arguments)."""
    tasks = [{"name": "ner", "type": "ner", "format": "conll", "path": str(tasks_dir / "ner"),
              "labels": ["O", "B-TERM", "I-TERM"]},
             {"name": "cls", "type": "classification", "format": "jsonl", "path": str(tasks_dir / "cls"),
              "labels": ["tech", "plain"]}]
    return [f"base_model.name_or_path={model}", "finetune.tasks=" + json.dumps(tasks), "finetune.seeds=[1]",
            "finetune.epochs=4", "finetune.lr=0.003", "finetune.batch_size=8", "finetune.max_length=24", *extra]


def make_cfg(model: Path, tasks_dir: Path, *extra: str):
    return load_domain("science", cfg_overrides(model, tasks_dir, *extra))


def tiny_classifier():
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=64,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def token_examples(n: int) -> list[dict]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(n):
        length = 4 + i % 9
        ids = torch.randint(5, 100, (length,), generator=g).tolist()
        out.append({"input_ids": ids, "attention_mask": [1] * length, "labels": int(ids[0] > 50)})
    return out


def predict_labels(folder: Path, task, examples, custom: bool) -> list:
    """Labels the way a transformers user gets them: Auto classes, the folder's tokenizer, argmax, id2label."""
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    auto = AutoModelForTokenClassification if task.type == "ner" else AutoModelForSequenceClassification
    model = auto.from_pretrained(folder, trust_remote_code=custom).eval()
    id2label = model.config.id2label
    with torch.no_grad():
        if task.type != "ner":
            enc = tok([ex.text for ex in examples], padding=True, truncation=True, max_length=24, return_tensors="pt")
            return [id2label[int(i)] for i in model(**enc).logits.argmax(-1)]
        out = []
        for ex in examples:
            enc = tok(list(ex.tokens), is_split_into_words=True, truncation=True, max_length=24, return_tensors="pt")
            row = model(**enc).logits[0].argmax(-1)
            first: dict[int, int] = {}
            for pos, word in enumerate(enc.word_ids()):
                if word is not None:
                    first.setdefault(word, pos)
            out.append(to_iob2([id2label[int(row[first[w]])] for w in range(len(ex.tokens))], "IOB2", [0]))
        return out


FILLER = ("the a of system data code runs on uses with file memory network old new fast small large program "
          "language user server process list string object value type").split()
KEYWORDS = {"alpha": "red", "beta": "green", "gamma": "blue"}
SIZES = {"train": 90, "validation": 30, "test": 45}


def write_jsonl(folder: Path, rows: dict[str, list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, items in rows.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    return folder


def filler(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(FILLER) for _ in range(n)]


def keyword_task(tmp_path: Path, *, pair: bool = False) -> TaskConfig:
    """One keyword decides the label; with ``pair`` it sits in the text pair and the text is pure noise."""
    rng = random.Random(0)
    rows: dict[str, list[dict]] = {}
    for split, n in SIZES.items():
        rows[split] = []
        for i in range(n):
            key = list(KEYWORDS)[i % 3]
            words = filler(rng, 4 if pair else 8)
            words.insert(rng.randrange(len(words) + 1), key)
            row = {"text": " ".join(filler(rng, 4)), "pair": " ".join(words)} if pair else {"text": " ".join(words)}
            rows[split].append({**row, "label": KEYWORDS[key]})
    return TaskConfig(name="kw", type="classification", format="jsonl", path=str(write_jsonl(tmp_path / "kw", rows)),
                      labels=["red", "green", "blue"], text_pair_field="pair" if pair else None)
