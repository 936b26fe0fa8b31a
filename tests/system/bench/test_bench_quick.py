"""Every benchmark's quick mode runs and writes its JSON record, so a benchmark broken by a change (or by a
dependency a fresh `make setup` no longer installs) fails CI rather than its next user. The figures of a quick
run mean nothing and are not checked; the record's shape is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"

pytestmark = [pytest.mark.slow]

QUICK = {
    # script, arguments, the record it writes, keys the record must hold
    "corpus_build": (["--quick"], "corpus_build.json", ["sizes", "machine"]),
    "vocab": (["--quick"], "vocab.json", ["train_seconds", "encode_seconds"]),
    # bf16 contenders left out: on a CPU without native bf16 they are tens of times slower
    # (bench/results/cpu_precision_cpu-avx2_2026-11.md)
    "pretrain": (["--quick", "--contenders", "hf-line-by-line,hf-group-texts,domainbert"], "pretrain-quick.json",
                 ["summary", "contenders"]),
    "finetune": (["--quick"], "finetune.json", ["ours", "speedup_cpu_seconds_per_example"]),
    "langid_short": (["--quick"], "langid_short.json", ["contenders"]),
    "cpu_precision": ([], "cpu-precision.json", ["matmul_gflops", "auto_resolves_to"]),
    "cpu_ceiling": (["--quick"], "cpu-ceiling.json", ["gemm_one_thread", "mlm_step_tokens_per_s"]),
    "worker_exit": (["--quick"], "worker-exit.json", ["spread", "distributed_over_domainbert"]),
}


@pytest.mark.parametrize("script", sorted(QUICK))
def test_the_quick_mode_of_each_benchmark_runs(script, tmp_path):
    args, record, keys = QUICK[script]
    # the machine cache under tmp_path too: a quick warm-up must not be what a user's next run reuses
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = json.loads((tmp_path / record).read_text())
    for key in keys:
        assert key in written, (key, sorted(written))
