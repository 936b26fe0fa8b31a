"""Does autocast to bf16 pay on this CPU? fp32 against bf16 matrix products and a linear layer's training step.

    .venv/bin/python bench/cpu_precision.py

Prints and writes ``bench/results/cpu-precision.json``: torch's CPU capability, whether it reports native bf16
(AVX512-BF16 or AMX: ``core.distributed.native_bf16``), what ``precision: auto`` resolves to here, and GFLOP/s of
a 1024 x 1024 matrix product in each dtype and of a BERT-sized feed-forward layer (384 -> 1536, 2,048 rows)
trained in fp32 and under bf16 autocast, with torch's default threads. What it leaves out: whole models (the
pretraining benchmark times those) and GPUs.
"""

from __future__ import annotations

import time

import torch

from common import emit, git_revision, machine_info
from domainbert.core.distributed import native_bf16, resolve_precision


def matmul_gflops(dtype: torch.dtype, n: int = 1024, repeats: int = 5) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return repeats * 2 * n**3 / (time.perf_counter() - t0) / 1e9


def train_gflops(autocast: bool, rows: int = 2048, repeats: int = 5) -> float:
    layer, x = torch.nn.Linear(384, 1536), torch.randn(rows, 384)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        layer(x).sum().backward()
        t0 = time.perf_counter()
        for _ in range(repeats):
            layer(x).sum().backward()
    return repeats * 6 * rows * 384 * 1536 / (time.perf_counter() - t0) / 1e9


def main() -> None:
    cpu = torch.device("cpu")
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    train32, train16 = train_gflops(False), train_gflops(True)
    emit({"benchmark": "cpu-precision", "revision": git_revision(), "machine": machine_info(),
          "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
          "native_bf16": native_bf16(cpu), "auto_resolves_to": resolve_precision("auto", cpu),
          "matmul_gflops": {"fp32": round(fp32, 1), "bf16": round(bf16, 1), "bf16_over_fp32": round(bf16 / fp32, 3)},
          "linear_train_gflops": {"fp32": round(train32, 1), "bf16_autocast": round(train16, 1),
                                  "bf16_over_fp32": round(train16 / train32, 3)}}, "cpu-precision")


if __name__ == "__main__":
    main()
