"""How much of a classification task's floor comes from text past the encoder's window: the floor as shipped,
and again on each text cut to what the encoder reads.

    .venv/bin/python bench/floor_window.py law --task law-license-category
    .venv/bin/python bench/floor_window.py economics --task economics-reuters-topic

The floor is the fine-tuning stage's own (``finetune.floors.run_floor``: TF-IDF word 1-2-grams and logistic
regression, C and class weighting chosen on validation), on the task exactly as the profile loads it. The second
fit replaces every text of every split by the part the encoder reads: the base tokenizer's first
``finetune.max_length`` sub-tokens less the two special tokens (``chunks`` windows of them where the task reads
several), joined back into words (``convert_tokens_to_string``: lowercased, as the uncased base reads it). Prints
and writes ``bench/results/floor-window-<domain>-<task>.json``: test and validation macro-F1, per-class test F1
and the words kept for both fits. What it leaves out: the encoders (a run's report and the score files have
them), and any claim about an encoder given more of the text (the cut floor bounds what the window costs this
bag of words; it is not an experiment on the encoder).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from typing import Any

from common import emit, git_revision, machine_info, set_offline_env


def cut_to_window(data: Any, tokenizer: Any, max_length: int, chunks: int) -> tuple[list[int], int]:
    """Every text of every split replaced, in place, by the words of its first ``chunks`` windows of
    ``max_length - 2`` sub-tokens; returns the words each test text kept and how many test texts were cut."""
    kept: list[int] = []
    cut = 0
    for split, examples in data.splits.items():
        for example in examples:
            pieces = tokenizer.tokenize(example.text)
            example.text = tokenizer.convert_tokens_to_string(pieces[: (max_length - 2) * chunks])
            if split == "test":
                kept.append(len(example.text.split()))
                cut += len(pieces) > (max_length - 2) * chunks
    return kept, cut


def fit(data: Any) -> dict[str, Any]:
    """The task's floor, fitted and scored on the splits as they are, with its per-class test F1."""
    from sklearn.metrics import f1_score

    from domainbert.finetune.floors import run_floor

    started = time.perf_counter()
    out = run_floor(data)
    labels = data.label_list
    per_class = f1_score(out["gold"], out["pred"], labels=labels, average=None, zero_division=0)
    return {
        "test_macro_f1": round(out["test"]["macro_f1"], 4),
        "validation_macro_f1": round(out["validation"]["macro_f1"], 4),
        "per_class_test_f1": {label: round(float(f), 4) for label, f in zip(labels, per_class, strict=True)},
        "params": out["floor_params"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain")
    parser.add_argument("--task", required=True)
    parser.add_argument("--profile", default="offline")
    parser.add_argument("overrides", nargs="*", help="Domain overrides, as the CLI takes them.")
    args = parser.parse_intermixed_args()  # overrides may follow --task
    set_offline_env()
    from domainbert.core import logs

    logs.configure(logging.WARNING)
    from domainbert.config.domain import load_domain
    from domainbert.core.models import load_tokenizer
    from domainbert.finetune.jobs import load_task_data, task_config

    cfg = load_domain(args.domain, args.overrides, profile=args.profile)
    task = task_config(cfg, args.task)
    if task.type != "classification":
        raise SystemExit(f"error: {args.task} is a {task.type} task; this benchmark reads classification tasks")
    data = load_task_data(cfg, task)
    words = [len(example.text.split()) for example in data.splits["test"]]
    whole = fit(data)
    kept, cut = cut_to_window(data, load_tokenizer(cfg.base_model.name_or_path), cfg.finetune.max_length, task.chunks)
    window = fit(data)
    emit(
        {
            "revision": git_revision(),
            "machine": machine_info(),
            "domain": args.domain,
            "profile": args.profile,
            "task": args.task,
            "overrides": args.overrides,
            "max_length": cfg.finetune.max_length,
            "chunks": task.chunks,
            "test_words_median": {"whole": statistics.median(words), "window": statistics.median(kept)},
            "test_texts_cut": cut,
            "whole_text": whole,
            "window": window,
            "test_macro_f1_lost_to_the_window": round(whole["test_macro_f1"] - window["test_macro_f1"], 4),
            "per_class_lost": {
                k: round(v - window["per_class_test_f1"][k], 4) for k, v in whole["per_class_test_f1"].items()
            },
        },
        f"floor-window-{cfg.name}-{args.task}",
    )


if __name__ == "__main__":
    main()
