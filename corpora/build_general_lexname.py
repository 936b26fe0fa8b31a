"""Build corpora/tasks/general-lexname: a WordNet gloss -> its lexicographer class (general English, 10 classes).

The general-English task every model is also fine-tuned on, so the report can say what a domain's pretraining
cost outside the domain (forgetting). Deterministic: reads corpora/general/wordnet-glosses-*.jsonl.gz (the
shipped glosses), keeps noun glosses of one of CLASSES (``meta.lexname``) whose text is MIN_CHARS to MAX_CHARS
characters and occurs once in the whole file set (a text shared by several synsets would be ambiguous), and
draws per class (ids sorted, then shuffled with SEED) TRAIN, VALIDATION and TEST glosses. Writes
<split>.jsonl.gz ({"id","text","label","meta"}) in id order and prints counts. The text is the gloss unchanged,
so the pretraining streams can leave the task's glosses out by exact text (``pretrain.general_text``).
It does not decide which streams leave them out; the pipeline does.

Run: python corpora/build_general_lexname.py
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

from build_science_subject import write_splits  # the same file format and rebuild rule

HERE = Path(__file__).resolve().parent
SOURCES = sorted((HERE / "general").glob("wordnet-glosses-*.jsonl.gz"))
OUT = HERE / "tasks" / "general-lexname"
# the ten most frequent noun classes of WordNet 3.0
CLASSES = ["artifact", "person", "plant", "animal", "act", "communication", "state", "location", "attribute",
           "substance"]
SEED = 17
MIN_CHARS, MAX_CHARS = 30, 120
TRAIN, VALIDATION, TEST = 25, 15, 40


def main() -> None:
    records = [json.loads(line) for src in SOURCES for line in gzip.open(src, "rt", encoding="utf-8")]
    seen = Counter(r["text"] for r in records)
    by_label: dict[str, list[dict]] = {c: [] for c in CLASSES}
    for rec in records:
        pos, lexname = rec["meta"]["lexname"].split(".", 1)
        text = rec["text"]
        if pos != "noun" or lexname not in by_label or seen[text] > 1 or not MIN_CHARS <= len(text) <= MAX_CHARS:
            continue
        by_label[lexname].append({"id": rec["id"], "text": text, "label": lexname,
                                  "meta": {"lemmas": rec["meta"]["lemmas"], "lexname": rec["meta"]["lexname"]}})
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for label in CLASSES:
        items = sorted(by_label[label], key=lambda r: r["id"])
        random.Random(f"{SEED}:{label}").shuffle(items)
        splits["test"] += items[:TEST]
        splits["validation"] += items[TEST:TEST + VALIDATION]
        splits["train"] += items[TEST + VALIDATION:TEST + VALIDATION + TRAIN]
    write_splits(OUT, splits)


if __name__ == "__main__":
    main()
