"""Benchmark: our fine-tuning loop vs the plain transformers ``Trainer`` recipe of ``run_ner.py``.

Same model (the offline MiniLM base unless --model), same data (the science NER task, the offline subset),
same batch size, learning rate, epochs and seed, same process. The baseline is what a user would otherwise
run: examples padded to ``max_length`` (``run_ner.py --pad_to_max_length``), labels on the first sub-token,
``Trainer`` defaults otherwise (no length grouping, evaluation off during training). Ours: dynamic padding and
length-grouped batches (``domainbert.finetune.trainer``). Both are timed on training only (the Trainer's
``train_runtime``; our loop's optimisation time). Printed as one JSON object: examples/s of each, the ratio,
and CPU seconds per training example (all threads; steadier than wall time when the machine is shared),
plus test F1 of both against the task's floor (the CRF of ``finetune.floors``). A ratio between models that
learned nothing proves nothing, so each side's record says whether it ``learned`` (test F1 above the floor),
``ok`` is false and the exit status 1 unless both did, and the defaults (800 sentences, 4 epochs at lr 3e-4,
the offline demo's NER recipe) train long enough that both do. ``--quick`` (32 sentences, the test suite's
smoke check) does not check learning: its record says ``learning_checked: false``.

Run: python bench/finetune.py [--train-examples 800 --epochs 4 --lr 3e-4 --max-length 64 --batch-size 16 --threads 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, git_revision, machine_info, set_offline_env  # noqa: E402

set_offline_env()


def load_task_data(domain: str, task_name: str, train_examples: int, eval_examples: int) -> tuple[Any, str]:
    """The task's data cut to the given sizes, and the domain's base model reference."""
    from domainbert.config.domain import load_domain
    from domainbert.task_data.splits import load_task

    cfg = load_domain(domain)
    task = next(t for t in cfg.finetune.tasks if t.name == task_name)
    limits = {"max_train_examples": train_examples, "max_eval_examples": eval_examples}
    task = task.model_copy(update={**limits, "max_test_examples": eval_examples})
    return load_task(task), cfg.base_model.name_or_path


def trainer_recipe(data: Any, model_ref: str, batch_size: int, lr: float, epochs: float, seed: int,
                   max_length: int, device: str = "cpu", bf16: bool = False) -> dict[str, Any]:
    """The ``run_ner.py`` recipe (padded to ``max_length``) through the plain ``Trainer``; test F1 after it."""
    import torch
    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments

    from domainbert.finetune.batching import predict_logits
    from domainbert.finetune.ner import decode_ner, ner_metrics
    from domainbert.finetune.runner import _encode, _load_tokenizer, load_task_model

    tok = _load_tokenizer(model_ref, data)
    torch.manual_seed(seed)
    model = load_task_model(model_ref, data)
    label2id = {label: i for i, label in enumerate(data.label_list)}
    enc = tok([ex.tokens for ex in data.splits["train"]], is_split_into_words=True, truncation=True,
              max_length=max_length, padding="max_length")
    train = []
    for i, ex in enumerate(data.splits["train"]):
        prev, labels = None, []
        for wid in enc.word_ids(i):
            labels.append(-100 if wid is None or wid == prev else label2id[ex.tags[wid]])
            prev = wid
        train.append({k: enc[k][i] for k in enc.keys()} | {"labels": labels})
    with tempfile.TemporaryDirectory() as tmp:
        targs = TrainingArguments(output_dir=tmp, per_device_train_batch_size=batch_size, learning_rate=lr,
                                  num_train_epochs=epochs, seed=seed, use_cpu=(device == "cpu"), bf16=bf16,
                                  eval_strategy="no", save_strategy="no", report_to=[], logging_strategy="no",
                                  disable_tqdm=True)
        trainer = Trainer(model=model, args=targs, train_dataset=train, processing_class=tok,
                          data_collator=DataCollatorForTokenClassification(tok))
        c0 = time.process_time()
        metrics = trainer.train().metrics
        cpu_s = time.process_time() - c0
    feats = _encode(data, "test", tok, max_length)
    pred = decode_ner(predict_logits(model, feats, 64, int(tok.pad_token_id)), feats, data.splits["test"],
                      data.label_list)
    return {"examples_per_s": float(metrics["train_samples_per_second"]),
            "train_seconds": float(metrics["train_runtime"]),
            "cpu_seconds_per_example": cpu_s / (len(train) * epochs),
            "test_f1": ner_metrics([ex.tags for ex in data.splits["test"]], pred)["f1"], "train_examples": len(train)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="science")
    parser.add_argument("--task", default="science-terms-ner")
    parser.add_argument("--model", default=None, help="model reference (default: the domain's base model)")
    parser.add_argument("--train-examples", type=int, default=800)
    parser.add_argument("--eval-examples", type=int, default=200)
    parser.add_argument("--epochs", type=float, default=4.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="Smoke check: 32 training and 16 evaluation examples, 1 epoch; learning is not checked.")
    args = parser.parse_args()
    if args.quick:
        args.train_examples, args.eval_examples, args.epochs = 32, 16, 1.0

    import numpy as np
    import torch

    from domainbert.finetune.floors import run_floor
    from domainbert.finetune.runner import _encode, _load_tokenizer, run_finetune
    from domainbert.finetune.trainer import TrainSettings

    if args.threads:
        torch.set_num_threads(args.threads)
    data, base_ref = load_task_data(args.domain, args.task, args.train_examples, args.eval_examples)
    model_ref = args.model or base_ref
    settings = TrainSettings(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, seed=args.seed,
                             evals_per_epoch=1, patience=100)

    ours = run_finetune(data, model_ref, settings, args.max_length)
    base = trainer_recipe(data, model_ref, args.batch_size, args.lr, args.epochs, args.seed, args.max_length)
    out = {
        "model": model_ref, "task": args.task, "train_examples": base["train_examples"], "epochs": args.epochs,
        "batch_size": args.batch_size, "max_length": args.max_length, "torch_threads": torch.get_num_threads(),
        "ours": {"examples_per_s": ours["examples_per_s"], "train_seconds": ours["train_seconds"],
                 "cpu_seconds_per_example": ours["train_cpu_seconds"] / max(1, ours["train_examples"]),
                 "test_f1": ours["test"]["f1"]},
        "trainer_pad_to_max_length": {k: base[k] for k in ("examples_per_s", "train_seconds",
                                                          "cpu_seconds_per_example", "test_f1")},
    }
    base = out["trainer_pad_to_max_length"]
    out["speedup_examples_per_s"] = out["ours"]["examples_per_s"] / base["examples_per_s"]
    out["speedup_cpu_seconds_per_example"] = base["cpu_seconds_per_example"] / out["ours"]["cpu_seconds_per_example"]
    # A speed ratio of two models that learned nothing says nothing: both must beat the task's floor (the CRF).
    floor_f1 = run_floor(data)["test"]["f1"]
    out["floor_test_f1"] = floor_f1
    for side in (out["ours"], base):
        side["learned"] = side["test_f1"] > floor_f1
    out["learned"] = {"ours": out["ours"]["learned"], "trainer": base["learned"]}
    out["learning_checked"] = not args.quick
    out["speed_counts"] = all(out["learned"].values())
    out["ok"] = out["speed_counts"] or args.quick
    if args.quick:
        print("[bench/finetune] --quick: too few examples to learn, so learning is not checked and the ratio "
              "means nothing", file=sys.stderr)
    elif not out["speed_counts"]:
        print(f"[bench/finetune] test F1 ours {out['ours']['test_f1']:.3f}, Trainer {base['test_f1']:.3f}, floor "
              f"{floor_f1:.3f}: a side did not learn, so the speed ratio does not count (train longer)",
              file=sys.stderr)
    tok = _load_tokenizer(model_ref, data)
    out["mean_sequence_length"] = float(np.mean([len(f["input_ids"]) for f in _encode(data, "train", tok, args.max_length)]))
    out["git_revision"] = git_revision()
    out["machine"] = machine_info()
    emit(out, "finetune")
    if not out["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
