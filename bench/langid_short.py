"""Benchmark of language ID on short texts: how much real English each identifier throws away, how much
non-English it lets through, and how fast it is.

English texts (all shipped, all English): ``definitions`` (WordNet glosses, the definition before the quoted
examples), ``tweets`` (Trump tweets after ``tweet_normalize_v1``, as the tweets domain sees them) and
``headlines`` (Guardian business headlines). Non-English texts: translated messages of the Debian packages
installed on this machine (``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``; a message equal to its English
original, or holding format codes or markup, is left out), up to ``--per-language`` per language. Texts of
3 to 12 whitespace words are scored, in the bands 3-4, 5-6, 7-9 and 10-12 words.

Contenders: ``language_id_v1`` (top language English and probability >= 0.5, what the domains used),
``language_id_v1`` at ``min_confidence`` 0 (top language only), ``language_id_v2`` with its defaults (the
length-aware decision) and, when it can be imported (``--py3langid-path`` adds a folder to ``sys.path``),
py3langid's own ``classify`` (top language, and top language with probability >= 0.5).

Prints one JSON object (also ``bench/results/langid_short.json``): per contender, the false-drop rate per
English text type and word band, the share of non-English texts kept (per band and per language) and
texts per second over all scored texts (median, min and max of ``--repeats`` passes). Run:
``python bench/langid_short.py`` (``--py3langid-path DIR`` after ``pip install --target DIR py3langid``).
"""

from __future__ import annotations

import argparse
import gettext
import glob
import gzip
import json
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import emit, git_revision, machine_info, set_offline_env, spread  # noqa: E402

BANDS = [(3, 4), (5, 6), (7, 9), (10, 12)]
LANGUAGES = ["de", "es", "fr", "it", "pt", "nl", "sv", "da", "pl", "fi", "cs", "ro", "tr", "hu", "id", "ca", "nb",
             "sk", "hr", "sl", "et", "lt", "lv", "eu", "gl", "vi"]
MARKUP = re.compile(r"[%{}<>_\\/=&$@|\[\]]")


def _jsonl(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def english_texts() -> dict[str, list[str]]:
    """The shipped English short texts by type, whitespace collapsed."""
    from domainbert.config.corpus import FilterSpec
    from domainbert.corpus import filters

    tweet = filters.create(FilterSpec(name="tweet_normalize_v1"))
    glosses = [t for p in sorted((ROOT / "corpora/general").glob("wordnet-glosses-*.jsonl.gz")) for t in _jsonl(p)]
    sets = {"definitions": [g.split('; "')[0] for g in glosses],
            "tweets": [tweet.transform(t) for t in _jsonl(ROOT / "corpora/tweets/trump_tweets.jsonl.gz")],
            "headlines": list(_jsonl(ROOT / "corpora/economics/guardian_business_headlines.jsonl.gz"))}
    return {k: [" ".join(t.split()) for t in v] for k, v in sets.items()}


def foreign_texts(per_language: int, seed: int = 0) -> dict[str, list[str]]:
    """Translated Debian messages of 3-12 words per language (empty when none are installed)."""
    out = {}
    for lang in LANGUAGES:
        seen: set[str] = set()
        for path in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
            try:
                with open(path, "rb") as f:
                    catalog = gettext.GNUTranslations(f)._catalog
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            for src, msg in catalog.items():
                if not isinstance(src, str) or not isinstance(msg, str) or not src or msg.lower() == src.lower():
                    continue
                msg = " ".join(msg.split())
                if not MARKUP.search(msg) and 3 <= len(msg.split()) <= 12:
                    seen.add(msg)
        texts = sorted(seen)
        random.Random(seed).shuffle(texts)
        if texts:
            out[lang] = texts[:per_language]
    return out


def band(text: str) -> str | None:
    n = len(text.split())
    return next((f"{lo}-{hi}" for lo, hi in BANDS if lo <= n <= hi), None)


def contenders(py3langid_path: str | None) -> dict:
    """name -> function(texts) -> list of keep flags (English kept)."""
    from domainbert.config.corpus import FilterSpec
    from domainbert.corpus import filters

    def ours(name, **options):
        comp = filters.create(FilterSpec(name=name, options={"languages": ["en"], **options}))
        return lambda texts: [keep for keep, _ in comp.filter_batch(texts)]

    out = {"language_id_v1": ours("language_id_v1", min_confidence=0.5),
           "language_id_v1_top_only": ours("language_id_v1", min_confidence=0.0),
           "language_id_v2": ours("language_id_v2")}
    if py3langid_path:
        sys.path.insert(0, py3langid_path)
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        return out
    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    out["py3langid_top_only"] = lambda texts: [ident.classify(t)[0] == "en" for t in texts]
    out["py3langid_p0.5"] = lambda texts: [(lang == "en" and p >= 0.5) for lang, p in map(ident.classify, texts)]
    return out


def rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 5) if flags else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over all texts per contender")
    parser.add_argument("--py3langid-path", help="folder holding the py3langid package (pip install --target)")
    parser.add_argument("--quick", action="store_true", help="Smoke check: 20 texts per language, 1 repeat.")
    args = parser.parse_args()
    if args.quick:
        args.per_language, args.repeats = 20, 1
    set_offline_env()
    english = {k: [t for t in v if band(t)] for k, v in english_texts().items()}
    foreign = foreign_texts(args.per_language)
    all_texts = [t for v in english.values() for t in v] + [t for v in foreign.values() for t in v]
    result: dict = {"benchmark": "langid_short", "revision": git_revision(), "machine": machine_info(),
                    "english_texts": {k: len(v) for k, v in english.items()},
                    "foreign_texts": {k: len(v) for k, v in foreign.items()}, "contenders": {}}
    for name, fn in contenders(args.py3langid_path).items():
        fn(all_texts[:100])  # loads the model outside the timing
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            keep = fn(all_texts)
            rates.append(len(all_texts) / (time.perf_counter() - start))
        flags = dict(zip(all_texts, keep, strict=True))  # equal texts get equal verdicts
        row: dict = {"texts_per_s": spread(rates), "english_false_drop": {}, "foreign_kept": {}}
        dropped_en = [not flags[t] for v in english.values() for t in v]
        row["english_false_drop"]["all"] = rate(dropped_en)
        for kind, texts in english.items():
            row["english_false_drop"][kind] = {"all": rate([not flags[t] for t in texts])} | {
                f"{lo}-{hi}": rate([not flags[t] for t in texts if band(t) == f"{lo}-{hi}"]) for lo, hi in BANDS}
        kept = {lang: [flags[t] for t in texts] for lang, texts in foreign.items()}
        row["foreign_kept"]["all"] = rate([k for v in kept.values() for k in v])
        row["foreign_kept"] |= {f"{lo}-{hi}": rate([flags[t] for v in foreign.values() for t in v
                                                    if band(t) == f"{lo}-{hi}"]) for lo, hi in BANDS}
        row["foreign_kept"]["by_language"] = {lang: rate(v) for lang, v in kept.items()}
        result["contenders"][name] = row
    result["machine_end"] = machine_info()
    emit(result, "langid_short")


if __name__ == "__main__":
    main()
