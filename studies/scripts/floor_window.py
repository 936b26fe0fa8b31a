"""How much of a classification task's floor comes from text past the encoder's window: the floor as shipped, on
the text as the encoder's tokenizer gives it, and on that text cut to what the encoder reads.

    .venv/bin/python studies/scripts/floor_window.py law --task law-license-category
    .venv/bin/python studies/scripts/floor_window.py economics --task economics-reuters-topic

The floor is the fine-tuning stage's own (``finetune.floors.run_floor``: TF-IDF word 1-2-grams and logistic
regression, C and class weighting chosen on validation), on the task exactly as the profile loads it. The second
fit reads every text of every split as the encoder's tokenizer gives it, joined back into words
(``convert_tokens_to_string``: lowercased, accents stripped, punctuation split off, unknown characters
``[UNK]``), whole; the third the same, cut to the part the encoder reads: the first ``finetune.max_length``
sub-tokens less the two special tokens (``chunks`` windows of them where the task reads several). The window's
cost is the second fit's score less the third's, so that the tokenizer's normalisation, which moves the floor by
itself, is not counted as the window's; its interval and p-value are the report's paired bootstrap over test
examples (``report.draws.RunScores``, 10,000 draws), so they say how far one test set's examples carry it,
not how another fit would move. Prints and writes ``bench/results/floor-window-<domain>-<task>.json``: test and
validation macro-F1, per-class test F1 and the words kept for the three fits. What it leaves out: the
encoders (a run's report and the score files have them), and any claim about an encoder given more of the text
(the cut floor bounds what the window costs this bag of words; it is not an experiment on the encoder).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import domain_task_args, emit, task_record  # noqa: E402


def as_tokenized(data: Any, tokenizer: Any, limit: int | None) -> tuple[list[int], int]:
    """Every text of every split replaced, in place, by the words of its first ``limit`` sub-tokens (None: all
    of them); returns the words each test text kept and how many test texts were cut."""
    kept: list[int] = []
    cut = 0
    for split, examples in data.splits.items():
        for example in examples:
            pieces = tokenizer.tokenize(example.text)
            example.text = tokenizer.convert_tokens_to_string(pieces[:limit])
            if split == "test":
                kept.append(len(example.text.split()))
                cut += limit is not None and len(pieces) > limit
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
        "answers": (out["gold"], out["pred"]),
        "test_macro_f1": round(out["test"]["macro_f1"], 4),
        "validation_macro_f1": round(out["validation"]["macro_f1"], 4),
        "per_class_test_f1": {label: round(float(f), 4) for label, f in zip(labels, per_class, strict=True)},
        "params": out["floor_params"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def paired_difference(a: dict[str, Any], b: dict[str, Any], draws: int = 10_000) -> dict[str, Any]:
    """Test macro-F1 of fit ``a`` less fit ``b`` on the report's shared bootstrap draws over test examples
    (``report.draws.RunScores``): the 95% percentile interval and the two-sided p-value."""
    from domainbert.report.draws import RunScores, bounds, p_value
    from domainbert.report.inputs import FinetuneRun

    runs = [
        FinetuneRun(
            model=name, task="floor-window", seed=0, replicate=1, task_type="classification",
            primary_metric="macro_f1", scores={}, collapsed=False, retried=False,
            gold=f["answers"][0], pred=f["answers"][1],
        )
        for name, f in (("a", a), ("b", b))
    ]
    scores = RunScores(runs, "macro_f1", seed=0, chunk=draws)
    boot = scores.boot(0)
    diffs = boot[0] - boot[1]
    low, high = bounds(diffs, 0.05)
    whole = float(scores.full[0] - scores.full[1])
    return {"diff": round(whole, 4), "ci95": [round(low, 4), round(high, 4)], "p": round(p_value(diffs), 4)}


def main() -> None:
    args, cfg = domain_task_args(__doc__)
    from domainbert.core.models import load_tokenizer
    from domainbert.finetune.jobs import load_task_data, task_config

    task = task_config(cfg, args.task)
    if task.type != "classification":
        raise SystemExit(f"error: {args.task} is a {task.type} task; this benchmark reads classification tasks")
    tokenizer = load_tokenizer(cfg.base_model.name_or_path)
    data = load_task_data(cfg, task)
    words = [len(example.text.split()) for example in data.splits["test"]]
    written = fit(data)
    whole_words, _ = as_tokenized(data, tokenizer, None)
    whole = fit(data)
    data = load_task_data(cfg, task)
    kept, cut = as_tokenized(data, tokenizer, (cfg.finetune.max_length - 2) * task.chunks)
    window = fit(data)
    lost = paired_difference(whole, window)
    for record in (written, whole, window):
        record.pop("answers")
    emit(
        {
            **task_record(args),
            "max_length": cfg.finetune.max_length,
            "chunks": task.chunks,
            "test_words_median": {
                "as_written": statistics.median(words),
                "tokenized": statistics.median(whole_words),
                "window": statistics.median(kept),
            },
            "test_texts_cut": cut,
            "as_written": written,
            "whole_text": whole,
            "window": window,
            "test_macro_f1_moved_by_the_tokenizer": round(written["test_macro_f1"] - whole["test_macro_f1"], 4),
            "test_macro_f1_lost_to_the_window": lost,
            "per_class_lost": {
                k: round(v - window["per_class_test_f1"][k], 4) for k, v in whole["per_class_test_f1"].items()
            },
        },
        f"floor-window-{cfg.name}-{args.task}",
    )


if __name__ == "__main__":
    main()
