"""bench/gpu_check.py's ``--cpu-smoke``: the loader alone in quick mode, and ``--only``'s refusals. Every other
configuration's smoke run, and the record's shape in full, is checked where bench/device_session.py runs the
check (tests/system/bench/test_device_session.py), so the check cannot rot between the times a device is lent.
The figures of a smoke run mean nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"

pytestmark = [pytest.mark.slow]


def _gpu_check(tmp_path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(BENCH / "gpu_check.py"), "--cpu-smoke", *args]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def test_loader_quick_mode_measures_the_stored_ids_and_the_one_off_tokenizing(tmp_path):
    proc = _gpu_check(tmp_path, "--only", "loader", "--loader-seconds", "0.5", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout)
    loader = record["configurations"]["loader"]
    once = loader["tokenize_once"]
    # The benchmark corpus's training split (FOLDOC, bench/pretrain.py), BERT's uncased vocabulary: uint16 ids.
    assert once["documents"] > 10_000 and once["tokens"] > 1_000_000 and once["dtype"] == "uint16"
    assert once["text_mb_per_s"] > 0 and once["tokens_per_s"] > 0 and once["text_bytes"] > 4_000_000
    for label in ("stored", "one_thread", "read_ahead"):
        for shape in ("256x128", "64x512"):
            assert loader[label]["shapes"][shape]["batches"] >= 1, (label, shape)
    assert record["loader_real_tokens_per_s"] == loader["stored"]["real_tokens_per_s"] > 0
    assert record["targets"]["loader_at_least_1m_tokens_per_s"] == (record["loader_real_tokens_per_s"] >= 1e6)
    assert "tokenized once at" in proc.stderr and len(loader["load_average"]) == 3


def test_only_picks_configurations_and_unknown_names_fail(tmp_path):
    proc = _gpu_check(tmp_path, "--only", "own-1024", timeout=120)
    assert proc.returncode == 2 and "unknown configuration" in proc.stderr
