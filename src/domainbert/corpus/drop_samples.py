"""A small sample of the documents each filter dropped, so a user sees a filter's mistakes at a glance.

Counts say how much a filter removed, not whether it was right: a language filter that throws away short
English definitions shows up only when someone reads what it dropped. Per filter, the sample is the ``k``
dropped documents with the smallest hash of (source, id), a bottom-k sample: spread over the whole corpus,
the same whatever the shard boundaries or worker count, and mergeable (the bottom ``k`` of the shards'
samples is the corpus's). Each example keeps the reason, the source, the id and the first ``MAX_CHARS``
characters of the original text. Documents decontamination removed, or cut sentences from before a filter
dropped what was left, are left out (their text would put evaluation data in the report, and the filter
did not judge it). This module neither filters nor renders the report; ``report_tables`` only
shapes the rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# One sampled document: its ``reason``, ``source``, ``id`` and the start of its ``text`` (shard samples also
# carry the ``key`` they are ordered by; the corpus's sample drops it). Every value is a string: the shard's
# id and source columns are strings (``store.SCHEMA``).
Example = dict[str, str]

K = 5
MAX_CHARS = 300
LEFT_OUT = ("decontamination",)


def _key(source: str, doc_id: str) -> str:
    return hashlib.blake2b(f"{source}\x00{doc_id}".encode(), digest_size=8).hexdigest()


def shard_sample(
    ids: list[str],
    sources: list[str],
    reasons: list[str | None],
    texts: list[str],
    recut: set[int] | None = None,
    k: int = K,
) -> dict[str, list[Example]]:
    """Per filter name, up to ``k`` dropped documents of one shard (``reasons[i]`` is ``"filter:reason"``
    for a dropped document, None for a kept one; ``recut``: the documents decontamination cut sentences from
    before the filters saw them again, left out like decontamination's own drops)."""
    by_filter: dict[str, list[Example]] = {}
    for i, (doc_id, source, reason, text) in enumerate(zip(ids, sources, reasons, texts, strict=True)):
        if reason is None:
            continue
        name, _, why = reason.partition(":")
        if name in LEFT_OUT or (recut and i in recut):
            continue
        by_filter.setdefault(name, []).append(
            {
                "key": _key(str(source), str(doc_id)),
                "reason": why,
                "source": source,
                "id": doc_id,
                "text": text[:MAX_CHARS],
            }
        )
    return {name: sorted(rows, key=lambda r: r["key"])[:k] for name, rows in by_filter.items()}


def merge(
    samples: Iterable[dict[str, list[Example]] | None], order: list[str] | None = None, k: int = K
) -> dict[str, list[Example]]:
    """The corpus's sample per filter from the shards' (a shard processed by an older version has none).

    Filters come in ``order`` (the pipeline's), any other name after them by name: never in the order the
    shards arrive, which a resumed build changes."""
    pooled: dict[str, list[Example]] = {}
    for sample in samples:
        for name, rows in (sample or {}).items():
            pooled.setdefault(name, []).extend(rows)
    rank = {name: i for i, name in enumerate(order or [])}
    return {
        name: [{k_: v for k_, v in r.items() if k_ != "key"} for r in sorted(pooled[name], key=_sample_order)[:k]]
        for name in sorted(pooled, key=lambda n: (rank.get(n, len(rank)), n))
    }


def _sample_order(row: Example) -> tuple[str, str, str]:
    # The key first; source and id break a tie (one document read twice), so no order of arrival shows.
    return (row["key"], row["source"], row["id"])


def report_tables(examples: dict[str, list[Example]]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The corpus report's table of sampled drops (``examples``: the manifest's ``filter_examples``, as
    ``merge`` returns it); none when nothing was sampled."""
    rows = [
        [name, ex["reason"], ex["source"], ex["id"], ex["text"].replace("\n", " ")]
        for name, sample in examples.items()
        for ex in sample
    ]
    if not rows:
        return []
    return [
        (
            f"Dropped documents: a sample of up to {K} per filter (check the filters' mistakes)",
            ["filter", "reason", "source", "id", f"text (first {MAX_CHARS} characters)"],
            rows,
        )
    ]
