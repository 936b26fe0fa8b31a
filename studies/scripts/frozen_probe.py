"""A frozen probe of a run's encoders on one classification task: do their features hold the task's answer,
with no fine-tuning seed in the way?

    python studies/scripts/frozen_probe.py runs/study-0 manpages-fr-section [--models base continued control]

Each encoder (``base`` is the run's warmed base, an arm its ``pretrain/<arm>/model``) encodes every split's texts
(the first ``--max-length`` tokens, mean-pooled last layer); a logistic regression with balanced class weights
is fitted on train, its C chosen on validation, and scored on test (macro-F1, accuracy). Deterministic. A
diagnostic, not the report's comparison: no seeds, no interval. Prints one JSON document (also written to
``bench/results/frozen-probe-<task>.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, set_offline_env  # noqa: E402


def encode(path: str, texts: list[str], max_length: int) -> Any:
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, enc = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 32):
            batch = tok(texts[i : i + 32], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            mask = batch["attention_mask"].unsqueeze(-1).float()
            out.append(((enc(**batch).last_hidden_state * mask).sum(1) / mask.sum(1)).numpy())
    return np.concatenate(out)


def probe(features: dict[str, Any], labels: dict[str, list[str]]) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    best: tuple[float, float, Any] | None = None
    for c in (0.01, 0.1, 1.0, 10.0, 100.0):
        clf = LogisticRegression(C=c, class_weight="balanced", max_iter=3000).fit(features["train"], labels["train"])
        score = f1_score(labels["validation"], clf.predict(features["validation"]), average="macro")
        if best is None or score > best[0]:
            best = (score, c, clf)
    assert best is not None
    pred = best[2].predict(features["test"])
    return {
        "C": best[1],
        "validation_macro_f1": round(float(best[0]), 4),
        "test_macro_f1": round(float(f1_score(labels["test"], pred, average="macro")), 4),
        "test_accuracy": round(float(accuracy_score(labels["test"], pred)), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder (its domain is read from config.resolved.json)")
    parser.add_argument("task")
    parser.add_argument("--models", nargs="+", default=["base", "continued", "control"])
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args()
    set_offline_env()
    from domainbert.config.domain import RESOLVED_CONFIG, load_domain
    from domainbert.finetune.jobs import load_task_data, task_config

    saved = json.loads((args.run / RESOLVED_CONFIG).read_text())  # the domain, profile and overrides it ran with
    cfg = load_domain(saved["domain_file"], saved["overrides"], profile=saved["profile"])
    data = load_task_data(cfg, task_config(cfg, args.task))
    texts = {split: [ex.text for ex in rows] for split, rows in data.splits.items()}
    labels = {split: [ex.labels[0] for ex in rows] for split, rows in data.splits.items()}
    folders = {"base": args.run / "pretrain" / "base-warmup" / "model"}
    results = {}
    for name in args.models:
        t0 = time.perf_counter()
        path = str(folders.get(name, args.run / "pretrain" / name / "model"))
        features = {split: encode(path, rows, args.max_length) for split, rows in texts.items()}
        results[name] = {**probe(features, labels), "seconds": round(time.perf_counter() - t0, 1)}
    emit(
        {
            "run": str(args.run),
            "task": args.task,
            "results": results,
            "revision": git_revision(),
            "machine": machine_info(),
        },
        f"frozen-probe-{args.task}",
    )


if __name__ == "__main__":
    main()
