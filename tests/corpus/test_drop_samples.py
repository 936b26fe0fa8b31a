"""The per-filter sample of dropped documents: independent of sharding, decontamination left out, rendered."""

from __future__ import annotations

import random

from domainbert.corpus import drop_samples


def _docs(n: int, seed: int = 0):
    rng = random.Random(seed)
    ids = [f"doc-{i}" for i in range(n)]
    sources = [rng.choice(["a", "b"]) for _ in range(n)]
    reasons = [rng.choice([None, None, "language_id_v2:language_de", "min_length_v1:too_few_words",
                           "decontamination:overlap"]) for _ in range(n)]
    texts = [f"text of document {i} " * 40 for i in range(n)]
    return ids, sources, reasons, texts


def test_sample_is_the_same_whatever_the_shards():
    ids, sources, reasons, texts = _docs(500)
    whole = drop_samples.merge([drop_samples.shard_sample(ids, sources, reasons, texts)])
    shards = [drop_samples.shard_sample(ids[i:i + 37], sources[i:i + 37], reasons[i:i + 37], texts[i:i + 37])
              for i in range(0, 500, 37)]
    assert drop_samples.merge(shards + [None]) == whole
    assert set(whole) == {"language_id_v2", "min_length_v1"}  # decontamination is left out
    for name, rows in whole.items():
        assert len(rows) == drop_samples.K
        for row in rows:
            i = ids.index(row["id"])
            assert reasons[i] == f"{name}:{row['reason']}" and row["source"] == sources[i]
            assert row["text"] == texts[i][: drop_samples.MAX_CHARS] and "key" not in row


def test_report_table_lists_the_examples():
    filters = {"min_length_v1": {"dropped": 1, "reasons": {"too_few_words": 1},
                                 "examples": [{"reason": "too_few_words", "source": "a", "id": "x", "text": "a\nb"}]},
               "symbol_ratio_v1": {"dropped": 0, "reasons": {}}}
    [(title, header, rows)] = drop_samples.report_tables(filters)
    assert "sample" in title and header[0] == "filter"
    assert rows == [["min_length_v1", "too_few_words", "a", "x", "a b"]]
    assert drop_samples.report_tables({"symbol_ratio_v1": {"dropped": 0, "reasons": {}}}) == []
