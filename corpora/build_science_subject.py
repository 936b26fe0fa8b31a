"""Build corpora/tasks/science-subject: FOLDOC entries -> one subject label (a small classification task).

Deterministic: reads corpora/science/foldoc.jsonl.gz (the shipped corpus), keeps entries that carry exactly
one of SUBJECTS in ``meta.subjects`` (other, unlisted subjects may also be present), drops the headword line
from the text, and splits each subject's entries 80/10/10 into train/validation/test (ids sorted, then
shuffled with SEED). Writes <split>.jsonl.gz ({"id","text","label","meta"}) in id order and prints counts.
URLs (``http://``, ``https://``, ``ftp://``, ``www.``) are removed, with their brackets: they are link targets,
not prose, and often spell out the answer. Texts are capped at MAX_CHARS characters (cut at a word boundary)
to keep the files small.

Run: python corpora/build_science_subject.py
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "science" / "foldoc.jsonl.gz"
OUT = HERE / "tasks" / "science-subject"
SUBJECTS = ["language", "networking", "programming", "hardware", "operating system", "company", "mathematics"]
SEED = 13
MAX_CHARS = 600
MIN_CHARS = 40


def body(text: str) -> str:
    """The entry text without its first (headword) line, whitespace-trimmed and capped."""
    rest = text.split("\n", 1)[1] if "\n" in text else ""
    rest = re.sub(r"\(?(?:https?|ftp)://[^\s)]*\)?|\(?\bwww\.[^\s)]*\)?", "", rest)
    rest = re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", rest)).strip()
    if len(rest) > MAX_CHARS:
        rest = rest[:MAX_CHARS].rsplit(" ", 1)[0]
    return rest


def main() -> None:
    by_label: dict[str, list[dict]] = {s: [] for s in SUBJECTS}
    with gzip.open(SOURCE, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            chosen = [s for s in dict.fromkeys(rec["meta"].get("subjects") or []) if s in SUBJECTS]
            text = body(rec["text"])
            if len(chosen) != 1 or len(text) < MIN_CHARS:
                continue
            by_label[chosen[0]].append({"id": rec["id"], "text": text, "label": chosen[0],
                                        "meta": {"headword": rec["meta"].get("headword"),
                                                 "subjects": rec["meta"].get("subjects")}})
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for label in SUBJECTS:
        items = sorted(by_label[label], key=lambda r: r["id"])
        random.Random(f"{SEED}:{label}").shuffle(items)
        n = len(items)
        n_val, n_test = round(n * 0.1), round(n * 0.1)
        splits["test"] += items[:n_test]
        splits["validation"] += items[n_test:n_test + n_val]
        splits["train"] += items[n_test + n_val:]
    write_splits(OUT, splits)


def write_splits(out: Path, splits: dict[str, list[dict]]) -> None:
    """Each split as ``out/<split>.jsonl.gz`` in id order, byte-identical across rebuilds; prints its counts."""
    out.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        rows.sort(key=lambda r: r["id"])
        # mtime=0 keeps the gzip bytes identical across rebuilds
        with open(out / f"{split}.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for row in rows:
                gz.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
        counts = Counter(r["label"] for r in rows)
        print(split, len(rows), dict(sorted(counts.items())), (out / f"{split}.jsonl.gz").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
