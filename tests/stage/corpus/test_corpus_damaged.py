"""A damaged corpus is not complete: a truncated manifest or shard makes the stage rerun (and ``plan`` say so,
naming the file) instead of being skipped as up to date and failing in the next stage."""

from __future__ import annotations

import logging

from domainbert.core.paths import RunLayout
from domainbert.corpus.build import build_corpus
from domainbert.plan.stage_state import corpus_state, status
from support.corpus import corpus_cfg, make_inputs, shard_bytes


def _truncate(path, keep: int = 100) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_a_truncated_manifest_or_shard_is_stale_and_rebuilt(tmp_path, caplog):
    make_inputs(tmp_path)
    cfg, layout = corpus_cfg(tmp_path), RunLayout(tmp_path / "run")
    manifest = build_corpus(cfg, layout)
    built = shard_bytes(layout.corpus)
    caplog.set_level(logging.WARNING, logger="domainbert")
    for damaged in (layout.corpus / "manifest.json", sorted(layout.corpus.glob("train/shard-*.parquet"))[0]):
        _truncate(damaged)
        state = corpus_state(cfg, layout)
        assert not state.current
        line = status(state, layout.corpus)
        assert line.startswith(f"will rerun: {damaged}: damaged") and "\n" not in line
        assert build_corpus(cfg, layout) == manifest  # rebuilt, not skipped, and the same as before
        assert shard_bytes(layout.corpus) == built
        assert f"{damaged}: damaged" in caplog.text
        assert corpus_state(cfg, layout).current
