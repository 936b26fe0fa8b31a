"""Every benchmark's quick mode runs and writes its JSON record, so a benchmark broken by a change (or by a
dependency a fresh `make setup` no longer installs) fails CI rather than its next user. The figures of a quick
run mean nothing and are not checked; the record's shape is."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.quick_modes import run_quick

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
    "finetune_phases": (["--quick", "--repeats", "1"], "finetune-phases.json", ["phases", "same_predictions"]),
    "langid_short": (["--quick"], "langid_short.json", ["contenders"]),
    "cpu_precision": ([], "cpu-precision.json", ["matmul_gflops", "auto_resolves_to"]),
    "cpu_ceiling": (["--quick"], "cpu-ceiling.json", ["gemm_one_thread", "mlm_step_tokens_per_s"]),
    "worker_exit": (["--quick"], "worker-exit.json", ["spread", "distributed_over_domainbert"]),
}


@pytest.mark.parametrize("script", sorted(QUICK))
def test_the_quick_mode_of_each_benchmark_runs(script, tmp_path):
    args, record, keys = QUICK[script]
    written = run_quick(BENCH / f"{script}.py", args, record, tmp_path)
    for key in keys:
        assert key in written, (key, sorted(written))
