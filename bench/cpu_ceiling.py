"""How close can the demo's compute get to this CPU? fp32 matrix products at the encoder's shapes, and a plain
PyTorch masked-LM step of the offline base's architecture, to hold the pipeline's own figures against.

    .venv/bin/python bench/cpu_ceiling.py [--quick]

Prints and writes ``bench/results/cpu-ceiling.json``:
- ``gemm``: GFLOP/s of fp32 products of a fine-tuning batch's activations (1,408 rows: 64 sentences of 22 tokens)
  by the 6 x 384 encoder's weight shapes, on one thread (a demo fine-tuning run's threads), each timed for 1.5 s;
- ``mlm_step``: tokens/s of a plain training step (a freshly initialised BERT of the base's shape, 16 x 128
  tokens, the prediction head on the 15% masked positions only, AdamW) on one and on two threads: what a user's
  own loop would reach, against the pretraining stage's ``real_tokens_per_s``.
``--quick`` (CI's check that it runs): one thread, one timed step, 0.1 s a product; its figures mean nothing.
What it leaves out: the pipeline itself (``pretrain.py`` and ``finetune.py`` time that), dropout's cost at
evaluation, and GPUs. Trains nothing it keeps.
"""

from __future__ import annotations

import argparse
import time

import torch

from common import emit, git_revision, machine_info

ROWS = 1408  # 64 sentences of 22 word pieces: a prediction batch of the demo's NER task
SHAPES = [(ROWS, 384, 384), (ROWS, 384, 1536), (ROWS, 1536, 384)]


def gemm_gflops(m: int, k: int, n: int, seconds: float = 1.5) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    t0, runs = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        a @ b
        runs += 1
    return runs * 2 * m * k * n / (time.perf_counter() - t0) / 1e9


def mlm_tokens_per_s(threads: int, steps: int) -> float:
    from transformers import BertConfig, BertForMaskedLM

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = BertForMaskedLM(
        BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536)
    ).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1000, 30000, (16, 128))
    masked = torch.rand(16, 128) < 0.15

    def step() -> None:
        hidden = model.bert(input_ids=ids).last_hidden_state[masked]
        torch.nn.functional.cross_entropy(model.cls(hidden), ids[masked]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(min(steps, 2)):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * ids.numel() / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one thread, one step: checks that it runs")
    quick = parser.parse_args().quick
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    seconds, steps, threads = (0.1, 1, (1,)) if quick else (1.5, 6, (1, 2))
    gemm = [{"m": m, "k": k, "n": n, "gflops": round(gemm_gflops(m, k, n, seconds), 1)} for m, k, n in SHAPES]
    per_s = {t: round(mlm_tokens_per_s(t, steps)) for t in threads}
    torch.set_num_threads(default_threads)
    emit(
        {
            "benchmark": "cpu_ceiling",
            "revision": git_revision(),
            "machine": machine_info(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "gemm_one_thread": gemm,
            "quick": quick,
            "mlm_step_tokens_per_s": {f"{t}_threads": v for t, v in per_s.items()},
        },
        "cpu-ceiling",
    )


if __name__ == "__main__":
    main()
