"""Build manpages-fr-order: is this French man-page phrase as written, or are two of its neighbouring words swapped?

    .venv/bin/python corpora/build_manpages_order.py [--language fr|es]

``--language es`` builds manpages-es-order from manpages-es-section the same way (the text below says French
for the language; ``manpages_language.LANGUAGES`` holds what differs).

The positive control's second task. The man section (``manpages-fr-section``) is carried by a few surface words
that a bag of words reads, so French pretraining could not show on it (studies/00-positive-control.md). This task
cannot be read from the words alone: an original phrase and its swapped copy hold the same words, and only a
model of French word order tells them apart. An encoder that learnt French in pretraining should do clearly
better on it than the English-only base, and English text of the same length should not help.

Read (nothing else): ``tasks/manpages-fr-section/{train,validation,test}.jsonl.gz``, built by
``build_manpages.py``. The splits stay the section task's, split by page, so the validation and test phrases
come from pages that are not in ``corpora/manpages/fr-corpus.jsonl.gz`` (the pretraining corpus).

An example is SPAN_WORDS consecutive words of one line of a window, the line being French (langid.py between
French and English, as the section task decides), at most SPANS_PER_LINE per line. Half of them, drawn per id,
get two neighbouring words swapped: a pair, drawn per id, of two different words made of letters only (no digit,
no apostrophe, no punctuation, so the swap leaves no mark of its own). A phrase with no such pair is no example.
Train and validation keep at most MAX_TRAIN and MAX_VALIDATION examples (in sha256(id) order); test keeps every
example. A validation or test phrase whose original words are a training phrase's too (boilerplate repeated
across pages), or an earlier phrase's of its own split, is no example. Writes ``tasks/manpages-fr-order/{train,validation,test}.jsonl.gz`` (gzip, mtime 0, rows in id order)
and prints the counts its PROVENANCE.md records. Deterministic: the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from manpages_language import LANGUAGES, Language  # noqa: E402

ROOT = Path(__file__).resolve().parent

SEED = 29
SPAN_WORDS = 16  # about 30 of the base's tokens: max_length 64 reads every example whole
SPANS_PER_LINE = 2  # so that a long paragraph does not fill the task
MAX_TRAIN, MAX_VALIDATION = 1000, 600  # a small labelled set (the low-resource setting of the literature)
LETTERS = re.compile(r"^[^\W\d_]+$")  # a word of letters only (accented letters are letters)

def read_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def spans(row: dict, lang: Language) -> list[tuple[str, list[str]]]:
    """(id, words) of the phrases a section-task window gives: SPAN_WORDS-word runs of its French lines."""
    out = []
    for n, line in enumerate(row["text"].split("\n")):
        words = line.split()
        if len(words) < SPAN_WORDS or lang.identifier().classify(line)[0] != lang.code:
            continue
        for k in range(min(SPANS_PER_LINE, len(words) // SPAN_WORDS)):
            out.append((f"{row['id']}:{n}:{k}", words[k * SPAN_WORDS : (k + 1) * SPAN_WORDS]))
    return out


def swappable(words: list[str]) -> list[int]:
    """Positions i where words i and i+1 are two different words of letters only."""
    return [
        i
        for i in range(len(words) - 1)
        if LETTERS.match(words[i]) and LETTERS.match(words[i + 1]) and words[i].lower() != words[i + 1].lower()
    ]


def example(span_id: str, words: list[str], row: dict) -> dict | None:
    """The task's row for one phrase (swapped or not, drawn from its id), or None when no pair can be swapped."""
    places = swappable(words)
    if not places:
        return None
    rng = random.Random(f"{SEED}:{span_id}")
    swapped = rng.random() < 0.5
    at = rng.choice(places)
    if swapped:
        words = [*words[:at], words[at + 1], words[at], *words[at + 2 :]]
    meta = {"page": row["meta"]["page"], "swapped_at": at if swapped else None, "notice": row["meta"]["notice"]}
    return {"id": span_id, "text": " ".join(words), "label": "swapped" if swapped else "original", "meta": meta}


def sha_order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r["id"])
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    labels = dict(sorted(Counter(r["label"] for r in rows).items()))
    pages = len({r["meta"]["page"] for r in rows})
    print(
        f"{path.relative_to(ROOT)}: {len(rows)} rows {labels}, {pages} pages, {path.stat().st_size:,} bytes, "
        f"sha256 {digest}"
    )


def phrases(split: str, lang: Language) -> list[tuple[dict, str, list[str]]]:
    """(window row, phrase id, words) of every phrase of a split of the section task."""
    rows = read_rows(lang.section_dir / f"{split}.jsonl.gz")
    return [(row, span_id, words) for row in rows for span_id, words in spans(row, lang)]


def main(lang: Language = LANGUAGES["fr"], task_dir: Path | None = None) -> None:
    """Write the order task of ``lang`` into ``task_dir`` (by default ``lang.order_dir``)."""
    task_dir = task_dir or lang.order_dir
    # the original phrases already used: every training phrase (kept or not), then each evaluation phrase kept
    seen = {" ".join(words).lower() for _, _, words in phrases("train", lang)}
    for split, cap in {"train": MAX_TRAIN, "validation": MAX_VALIDATION, "test": None}.items():
        made, no_pair, repeated = [], 0, 0
        for row, span_id, words in phrases(split, lang):
            key = " ".join(words).lower()
            if split != "train":
                repeated += key in seen
                if key in seen:
                    continue
                seen.add(key)
            ex = example(span_id, words, row)
            no_pair += ex is None
            made += [ex] if ex else []
        rows = sha_order(made)[:cap]
        print(
            f"{split}: {len(made)} phrases with a pair to swap ({no_pair} without, {repeated} repeated), "
            f"{len(rows)} kept"
        )
        write_jsonl(task_dir / f"{split}.jsonl.gz", rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--language", choices=sorted(LANGUAGES), default="fr", help="the phrases' language")
    main(LANGUAGES[parser.parse_args().language])
