"""Atomic artifacts: complete or absent, never half-written; fingerprints decide what is rebuilt."""

from __future__ import annotations

import json

import pytest

from domainbert.core.artifacts import (
    RECORD,
    atomic_output,
    content_hash,
    fingerprint,
    is_complete,
    read_record,
    recorded_hash,
)


def test_output_appears_only_after_success(tmp_path):
    final = tmp_path / "stage"
    with atomic_output(final, config={"a": 1}) as tmp:
        (tmp / "x.txt").write_text("hello")
        assert not final.exists()
    assert (final / "x.txt").read_text() == "hello"
    record = read_record(final)
    assert record["config"] == {"a": 1}
    assert record["content_hash"] == content_hash(final)
    assert is_complete(final, record["fingerprint"], verify=True)


def test_failure_leaves_previous_output_and_no_temp(tmp_path):
    final = tmp_path / "stage"
    with atomic_output(final, config={"v": 1}) as tmp:
        (tmp / "x.txt").write_text("first")
    with pytest.raises(RuntimeError):
        with atomic_output(final, config={"v": 2}) as tmp:
            (tmp / "x.txt").write_text("second, half")
            raise RuntimeError("killed")
    assert (final / "x.txt").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["stage"]


def test_fingerprint_changes_with_config_and_inputs(tmp_path):
    base = fingerprint({"lr": 1e-4}, {"corpus": "abc"})
    assert base == fingerprint({"lr": 1e-4}, {"corpus": "abc"})
    assert base != fingerprint({"lr": 2e-4}, {"corpus": "abc"})
    assert base != fingerprint({"lr": 1e-4}, {"corpus": "abd"})
    final = tmp_path / "stage"
    with atomic_output(final, config={"lr": 1e-4}, fp=base):
        pass
    assert is_complete(final, base)
    assert not is_complete(final, fingerprint({"lr": 2e-4}, {"corpus": "abc"}))


def test_tampered_output_fails_verification(tmp_path):
    final = tmp_path / "stage"
    with atomic_output(final, config={}) as tmp:
        (tmp / "weights.bin").write_bytes(b"\x00" * 10)
    expected = recorded_hash(final)
    (final / "weights.bin").write_bytes(b"\x01" * 10)
    assert not is_complete(final, verify=True)
    assert content_hash(final) != expected


def test_folder_without_record_is_not_complete(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "x").write_text("1")
    assert not is_complete(tmp_path / "half")
    (tmp_path / "half" / RECORD).write_text("{not json")
    assert not is_complete(tmp_path / "half")
    with pytest.raises(FileNotFoundError):
        recorded_hash(tmp_path / "elsewhere")
    json.dumps(fingerprint(1))  # a fingerprint is plain text


def test_a_record_names_the_commit_of_the_code_that_wrote_it_outside_the_fingerprint(tmp_path):
    """``studies/export_scores.py`` reads it to say which code made a study's runs (the commit at export time
    was all a score file had)."""
    import subprocess
    from pathlib import Path

    from domainbert.core import artifacts

    checkout = Path(artifacts.__file__).resolve().parents[3]
    if not (checkout / ".git").exists():
        pytest.skip("not run from a git checkout: the record holds None")
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    with atomic_output(tmp_path / "stage", config={"a": 1}) as tmp:
        (tmp / "x.txt").write_text("hello")
    record = read_record(tmp_path / "stage")
    assert record["source_revision"] in (head, f"{head}+changes")
    assert record["fingerprint"] == fingerprint({"a": 1}, {}, artifacts.__version__)
