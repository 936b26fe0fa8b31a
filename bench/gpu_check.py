"""The GPU check: one command, within 8 minutes on one H100, that says how fast the pipeline trains there.

It measures, each configuration in its own child process with a timeout (a failed one is recorded with its
error line and the rest go on; bench/gpu_check_runs.py holds the measurements):

- ``loader``: real tokens/s of packed, masked BERT batches from the benchmark corpus (FOLDOC, as
  bench/pretrain.py builds it), no model: the rate the loader can feed, from the stored token ids a run reads
  (``pretrain.token_store``; tokenizing the split once is its own figure, in MB/s of text) and, for
  comparison, tokenizing as it goes;
- ``own-128``, ``own-512``: the pipeline's own trainer and engine on a randomly initialised BERT-base (BERT's
  uncased configuration and vocabulary, nothing downloaded) in bf16: real tokens/s, MFU, peak memory and the
  share of each step spent building its batch;
- ``deepspeed-zero2-128`` and ``torchrun-128``: the same through DeepSpeed ZeRO-2 and under ``torchrun`` on
  one GPU;
- ``hf-group-texts-bf16-128`` and ``-512``: ``run_mlm.py``'s group_texts recipe (Trainer +
  DataCollatorForLanguageModeling, bf16) on the same model and corpus, so each own figure is also a ratio;
- ``finetune-ner``: fine-tuning BERT-base on science-terms-ner, ours against the ``run_ner.py`` Trainer recipe,
  in examples/s (random weights: the F1 it prints is not the point).

Each configuration runs warm-up steps, then a timed window (``--seconds``); a total budget (``--budget-s``)
skips what would not fit. MFU is against the device's dense bf16 peak (by name, bench/pretrain.PEAK_BF16; H100
and H200: 989 TFLOPS), or ``--peak-tflops``. It prints a table on stderr and one JSON document on stdout (also
written to bench/results/gpu_check.json) with device, driver, CUDA, torch and the commit.

``--compile`` turns torch.compile on for both sides (``pretrain.compile`` for the trainer, the Trainer's
``torch_compile`` for the recipe); the warm-up steps then hold the compilation. ``--only`` also orders the
configurations. ``--cpu-smoke`` runs the same code paths on the CPU in seconds with a 2-layer, 128-wide BERT (the loader at
the full BERT-base batch shapes); DeepSpeed is left out there (its CPU path compiles an op on first use, which
takes minutes) and the JSON says so. This script does not tune anything and does not profile a slow step.

Usage:
    python bench/gpu_check.py                        # on a GPU machine, all configurations
    python bench/gpu_check.py --only own-128,hf-group-texts-bf16-128
    python bench/gpu_check.py --cpu-smoke            # anywhere, seconds to a minute
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, git_revision, machine_info, results_dir, run_json_child, set_offline_env  # noqa: E402

CONFIGS = [
    "loader",
    "own-128",
    "own-512",
    "deepspeed-zero2-128",
    "torchrun-128",
    "hf-group-texts-bf16-128",
    "hf-group-texts-bf16-512",
    "finetune-ner",
]
ZERO2 = ["pretrain.deepspeed.enabled=true", "pretrain.deepspeed.zero_stage=2"]
# issue 43; the loader's: 3x own-128, and 1M real tokens/s even on the project's 2-core machine
TARGETS = {"mfu": 0.40, "ratio_vs_hf": 2.0, "deepspeed_within": 0.10, "loader_tokens_per_s": 1e6}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu-smoke", action="store_true", help="A tiny model on the CPU: the code paths, in seconds.")
    p.add_argument("--only", default=",".join(CONFIGS), help=f"Comma-separated subset of {', '.join(CONFIGS)}.")
    p.add_argument("--peak-tflops", type=float, default=None, help="Peak for MFU (default: by GPU name).")
    p.add_argument("--batch-128", type=int, default=256, help="Sequences per step at length 128 (BERT's 256).")
    p.add_argument("--batch-512", type=int, default=64, help="Sequences per step at length 512 (same tokens).")
    p.add_argument("--seconds", type=float, default=None, help="Timed window per configuration (GPU 20, smoke 1).")
    p.add_argument(
        "--loader-seconds", type=float, default=None, help="Timed window per loader shape (GPU 5, smoke 2)."
    )
    p.add_argument("--warmup-steps", type=int, default=None, help="Untimed steps first (GPU 10, smoke 1).")
    p.add_argument("--timeout", type=float, default=None, help="Seconds allowed per child (GPU 150, smoke 300).")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="Total seconds; later configurations are skipped when less than 30 s is left (GPU 450, smoke 900).",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model: pretrain.compile=true for the trainer, torch_compile for the recipe.",
    )
    p.add_argument("--out", type=Path, default=None, help="JSON path (default bench/results/gpu_check.json).")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    smoke = args.cpu_smoke
    for name, gpu, cpu in (
        ("seconds", 20.0, 1.0),
        ("loader_seconds", 5.0, 2.0),
        ("warmup_steps", 10, 1),
        ("timeout", 150.0, 300.0),
        ("budget_s", 450.0, 900.0),
    ):
        if getattr(args, name) is None:
            setattr(args, name, cpu if smoke else gpu)
    args.only = list(dict.fromkeys(c.strip() for c in args.only.split(",") if c.strip()))
    unknown = sorted(set(args.only) - set(CONFIGS))
    if unknown:
        p.error(f"unknown configuration(s) {unknown}; choose from {CONFIGS}")
    return args


def device_facts(args: argparse.Namespace) -> dict[str, Any]:
    """Device name, driver and memory from nvidia-smi (the parent never opens a CUDA context), CUDA and torch."""
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "kind": "cpu"}
    if not args.cpu_smoke:
        try:
            line = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.splitlines()[0]
            name, driver, memory = (part.strip() for part in line.split(","))
            facts.update(kind="cuda", name=name, driver=driver, memory=memory)
        except (OSError, subprocess.SubprocessError, IndexError, ValueError) as exc:
            facts["nvidia_smi_error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if facts["kind"] == "cpu":
        facts["name"] = machine_info().get("cpu_model")
    from pretrain import PEAK_BF16

    peak, source = None, None
    if args.peak_tflops:
        peak, source = args.peak_tflops * 1e12, "--peak-tflops"
    elif facts["kind"] == "cuda":
        key = next((k for k in PEAK_BF16 if k in facts["name"]), None)
        peak, source = (PEAK_BF16[key], f"{key} dense bf16 peak") if key else (None, "unknown GPU: pass --peak-tflops")
    facts.update(peak_flops=peak, peak_source=source)
    return facts


def specs(args: argparse.Namespace, work: Path, corpus_dir: Path, model_ref: str, device: str) -> dict[str, Any]:
    """Per configuration: (spec, launcher prefix or None) or a reason it is skipped."""
    smoke = args.cpu_smoke
    common = {
        "model_ref": model_ref,
        "corpus_dir": str(corpus_dir),
        "seed": 42,
        "lr": 5e-5,
        "device": device,
        "seconds": args.seconds,
        "warmup_steps": args.warmup_steps,
    }
    # The trainer's shapes: BERT-base's on a GPU; small ones for the tiny model on the CPU. The loader: always
    # BERT-base's, the shapes it must feed.
    b128, b512 = (8, 2) if smoke else (args.batch_128, args.batch_512)
    compiled = ["pretrain.compile=true"] if args.compile else []
    loader_shapes = [[args.batch_128, 128], [args.batch_512, 512]]
    hf = {**common, "kind": "hf", "max_documents": 1500 if smoke else None, "compile": args.compile}
    own = {**common, "kind": "pretrain", "overrides": compiled}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
    out: dict[str, Any] = {
        "loader": ({**common, "kind": "loader", "shapes": loader_shapes, "seconds": args.loader_seconds}, None),
        "own-128": ({**own, "batch_size": b128, "seq_len": 128}, None),
        "own-512": ({**own, "batch_size": b512, "seq_len": 512}, None),
        "deepspeed-zero2-128": ({**own, "batch_size": b128, "seq_len": 128, "overrides": ZERO2 + compiled}, None),
        "torchrun-128": ({**own, "batch_size": b128, "seq_len": 128}, torchrun),
        # The recipe tokenizes its whole corpus before training: a tenth of it is plenty for the smoke run.
        "hf-group-texts-bf16-128": ({**hf, "batch_size": b128, "seq_len": 128}, None),
        "hf-group-texts-bf16-512": ({**hf, "batch_size": b512, "seq_len": 512}, None),
        "finetune-ner": (
            {
                **common,
                "kind": "finetune",
                "task": "science-terms-ner",
                "epochs": 1.0,
                "train_examples": 64 if smoke else 8000,
                "eval_examples": 16 if smoke else 1000,
                "max_length": 32 if smoke else 128,
                "batch_size": 8 if smoke else 32,
            },
            None,
        ),
    }
    if smoke:
        out["deepspeed-zero2-128"] = "left out in --cpu-smoke: DeepSpeed's CPU path compiles an op on first use"
    for name, entry in out.items():
        if isinstance(entry, tuple):
            entry[0]["run_dir"] = str(work / "runs" / name)
    return out


def run_configuration(name: str, entry: Any, args: argparse.Namespace, work: Path, deadline: float) -> dict[str, Any]:
    if isinstance(entry, str):
        return {"skipped": entry}
    left = deadline - time.monotonic()
    if left < 30:
        return {"skipped": f"the {args.budget_s:.0f} s budget was spent"}
    spec, launcher = entry
    spec_path = work / "specs" / f"{name}.json"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(json.dumps(spec))
    out_path = spec_path.with_suffix(".out.json")
    argv = [
        *(launcher or [sys.executable]),
        str(Path(__file__).resolve()),
        "--child",
        str(spec_path),
        "--child-out",
        str(out_path),
    ]
    print(f"[gpu_check] {name} ...", file=sys.stderr, flush=True)
    record = run_json_child(
        argv,
        out_path,
        timeout=min(args.timeout, left),
        log=work / "logs" / f"{name}.log",
        env={"CUDA_VISIBLE_DEVICES": ""} if args.cpu_smoke else None,
    )
    if "error" in record:
        tail = [line for line in record.get("output_tail", "").splitlines() if line.strip()]
        record["error_line"] = tail[-1] if tail else record["error"]
    return record


def summarise(records: dict[str, dict[str, Any]], peak: float | None) -> dict[str, Any]:
    """MFU of every pretraining configuration, the ratios, and which targets hold (None: not measured)."""
    for record in records.values():
        if record.get("real_tokens_per_s") and record.get("flops_per_token"):
            record["mfu"] = round(record["real_tokens_per_s"] * record["flops_per_token"] / peak, 4) if peak else None
        elif record.get("kind") in ("pretrain", "hf") or "error" in record or "skipped" in record:
            record.setdefault("real_tokens_per_s", None)
            record.setdefault("mfu", None)

    def rate(name: str) -> float | None:
        return records.get(name, {}).get("real_tokens_per_s")

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    ratios = {
        "own_vs_hf_group_texts_bf16_128": ratio(rate("own-128"), rate("hf-group-texts-bf16-128")),
        "own_vs_hf_group_texts_bf16_512": ratio(rate("own-512"), rate("hf-group-texts-bf16-512")),
        "deepspeed_zero2_vs_own_128": ratio(rate("deepspeed-zero2-128"), rate("own-128")),
        "torchrun_vs_own_128": ratio(rate("torchrun-128"), rate("own-128")),
        "loader_vs_own_128": ratio(records.get("loader", {}).get("loader_real_tokens_per_s"), rate("own-128")),
        "finetune_vs_trainer": records.get("finetune-ner", {}).get("ratio_vs_trainer"),
    }

    def at_least(value: float | None, floor: float) -> bool | None:
        return None if value is None else value >= floor

    ds = ratios["deepspeed_zero2_vs_own_128"]
    targets = {
        "mfu_128_at_least_0.40": at_least(records.get("own-128", {}).get("mfu"), TARGETS["mfu"]),
        "mfu_512_at_least_0.40": at_least(records.get("own-512", {}).get("mfu"), TARGETS["mfu"]),
        "own_at_least_2x_hf_128": at_least(ratios["own_vs_hf_group_texts_bf16_128"], TARGETS["ratio_vs_hf"]),
        "own_at_least_2x_hf_512": at_least(ratios["own_vs_hf_group_texts_bf16_512"], TARGETS["ratio_vs_hf"]),
        "deepspeed_within_10_percent": None if ds is None else ds >= 1 - TARGETS["deepspeed_within"],
        "loader_at_least_3x_own_128": at_least(ratios["loader_vs_own_128"], 3.0),
        # a speed figure counts only where the model learned: the loss fell (bench/pretrain.loss_fell), and both
        # fine-tuning sides beat the task's floor
        "own_128_loss_fell": records.get("own-128", {}).get("loss_fell"),
        "own_512_loss_fell": records.get("own-512", {}).get("loss_fell"),
        "finetune_both_learned": _both(records.get("finetune-ner", {}).get("learned")),
        "loader_at_least_1m_tokens_per_s": at_least(
            records.get("loader", {}).get("loader_real_tokens_per_s"), TARGETS["loader_tokens_per_s"]
        ),
    }
    return {"ratios": ratios, "targets": targets}


def _both(learned: dict[str, bool] | None) -> bool | None:
    return None if not learned else all(learned.values())


def table(records: dict[str, dict[str, Any]]) -> str:
    def fmt(value: Any, pattern: str) -> str:
        return "-" if value is None else format(value, pattern)

    rows = [f"{'configuration':<26}{'real tok/s':>13}{'MFU':>8}{'peak MiB':>10}{'data wait':>11}  note"]
    for name, r in records.items():
        tokens = r.get("real_tokens_per_s", r.get("loader_real_tokens_per_s"))
        note = r.get("skipped") or r.get("error_line") or ""
        if r.get("kind") == "loader":
            once = r["tokenize_once"]
            note = f"stored ids; tokenized once at {once['text_mb_per_s']} MB/s of text ({once['build_seconds']} s)"
        if r.get("kind") == "finetune":
            note = f"{r['examples_per_s']:,.1f} examples/s, {r['ratio_vs_trainer']:.2f}x the Trainer recipe"
        rows.append(
            f"{name:<26}{fmt(tokens, ',.0f'):>13}{fmt(r.get('mfu'), '.1%'):>8}"
            f"{fmt(r.get('peak_memory_mib'), ',.0f'):>10}{fmt(r.get('data_wait_share'), '.1%'):>11}  {note}"
        )
    return "\n".join(rows)


def child_main(spec_path: Path, out_path: Path) -> int:
    import os

    from gpu_check_runs import MEASURES

    spec = json.loads(spec_path.read_text())
    record = MEASURES[spec["kind"]](spec)
    if int(os.environ.get("RANK", "0")) == 0:
        out_path.write_text(json.dumps(record, default=str))
    return 0


def run_check(args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration asked for, and the report."""
    started = time.monotonic()
    deadline = started + args.budget_s
    from pretrain import DEFAULT_SOURCE, prepare_corpus, prepare_model

    device = device_facts(args)
    work = results_dir() / "gpu-check-work"
    corpus_dir = prepare_corpus(work, DEFAULT_SOURCE)
    model = "tiny-bert" if args.cpu_smoke else "bert-base"
    model_ref = prepare_model(work, model)
    plan = specs(args, work, corpus_dir, model_ref, device["kind"])
    records = {
        name: run_configuration(name, plan[name], args, work, deadline) for name in args.only
    }  # in --only's order: a caller with little time puts first what it needs most
    summary = summarise(records, device["peak_flops"])
    text = table(records)
    print(text, file=sys.stderr, flush=True)
    return {
        "benchmark": "gpu_check",
        "mode": "cpu-smoke" if args.cpu_smoke else "gpu",
        "model": model,
        "device": device,
        "git_commit": git_revision(),
        "loader_real_tokens_per_s": records.get("loader", {}).get("loader_real_tokens_per_s"),
        "configurations": records,
        **summary,
        "settings": {k: v for k, v in vars(args).items() if k not in ("child", "child_out", "out")},
        "table": text.splitlines(),
        "seconds_total": round(time.monotonic() - started, 1),
        "machine": machine_info(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    set_offline_env()
    if args.child:
        return child_main(args.child, args.child_out)
    # Libraries print to stdout on import (DeepSpeed's accelerator line): stdout carries the JSON alone.
    with contextlib.redirect_stdout(sys.stderr):
        report = run_check(args)
    emit(report, "gpu_check", args.out)
    return 0 if all("error" not in r for r in report["configurations"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
