"""bench/gpu_check.py's ``--cpu-smoke`` runs every configuration's code path on the CPU and writes the record a
GPU run writes, so the check cannot rot between the times a device is lent. The figures of a smoke run mean
nothing and are only checked to be positive; the record's shape is checked in full."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"

pytestmark = [pytest.mark.slow]

PRETRAINING = ["own-128", "own-512", "torchrun-128", "hf-group-texts-bf16-128", "hf-group-texts-bf16-512"]


def _gpu_check(tmp_path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(BENCH / "gpu_check.py"), "--cpu-smoke", *args]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def test_cpu_smoke_writes_every_figure(tmp_path):
    proc = _gpu_check(tmp_path, "--peak-tflops", "1", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout)  # stdout is the JSON alone; the table goes to stderr
    assert record == json.loads((tmp_path / "gpu_check.json").read_text())
    assert "real tok/s" in proc.stderr and record["mode"] == "cpu-smoke"
    for key in ("device", "git_commit", "configurations", "ratios", "targets", "machine", "table"):
        assert key in record, key
    assert {"torch", "cuda", "name", "peak_flops"} <= set(record["device"])
    configs = record["configurations"]
    assert record["loader_real_tokens_per_s"] == configs["loader"]["stored"]["real_tokens_per_s"] > 0
    for label in ("stored", "one_thread", "read_ahead"):  # BERT-base batch shapes
        assert configs["loader"][label]["shapes"].keys() == {"256x128", "64x512"}
    assert record["targets"]["loader_at_least_1m_tokens_per_s"] in (True, False)
    for name in PRETRAINING:
        assert configs[name]["real_tokens_per_s"] > 0 and configs[name]["mfu"] > 0, (name, configs[name])
        assert configs[name]["peak_memory_mib"] > 0
    for name in ("own-128", "own-512", "torchrun-128"):
        assert 0 <= configs[name]["data_wait_share"] < 1
    assert configs["torchrun-128"]["launched_by_torchrun"] is True
    assert "skipped" in configs["deepspeed-zero2-128"]  # the JSON says the smoke mode leaves DeepSpeed out
    assert configs["finetune-ner"]["examples_per_s"] > 0 and configs["finetune-ner"]["trainer_examples_per_s"] > 0
    ratios = record["ratios"]
    assert ratios["own_vs_hf_group_texts_bf16_128"] > 0 and ratios["finetune_vs_trainer"] > 0


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
