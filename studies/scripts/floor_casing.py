"""How much of an NER task's CRF floor comes from capital letters: the floor as shipped, and again on lowercased text.

    .venv/bin/python studies/scripts/floor_casing.py economics --task economics-ner-silver
    .venv/bin/python studies/scripts/floor_casing.py science --task science-terms-ner
    .venv/bin/python studies/scripts/floor_casing.py economics --task economics-ner-silver "finetune.tasks=[...]"  # overrides

The floor is the fine-tuning stage's own (``finetune.floors.run_floor``: a CRF over word, affix, shape and +-2
context features, c1 and c2 chosen on validation), on the task exactly as the profile loads it (subsets
included). The second fit lowercases every token of every split before the features are read, so the CRF sees
what an uncased encoder sees (BERT uncased, the offline base). Prints and writes
``bench/results/floor-casing-<domain>-<task>.json``: test and validation F1 and per-type test F1 for both fits,
and their difference. What it leaves out: the encoders (a run's report has them), any claim that casing is why
an uncased encoder trails the floor (the lowercased floor is a bound on what case gives this CRF, not an
experiment on the encoder).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import domain_task_args, emit, task_record  # noqa: E402


def fit(cfg: Any, task_name: str, lowercase: bool) -> dict[str, Any]:
    """The task's floor, fitted and scored on the splits as loaded (lowercased first when asked)."""
    from domainbert.finetune.floors import run_floor
    from domainbert.finetune.jobs import load_task_data, task_config

    task = task_config(cfg, task_name)
    if task.type != "ner":
        raise SystemExit(f"error: {task_name} is a {task.type} task; this benchmark reads NER tasks (a CRF floor)")
    data = load_task_data(cfg, task)
    if lowercase:
        for examples in data.splits.values():
            for example in examples:
                example.tokens = [token.lower() for token in example.tokens]
    started = time.perf_counter()
    out = run_floor(data)
    return {
        "test_f1": round(out["test"]["f1"], 4),
        "validation_f1": round(out["validation"]["f1"], 4),
        "per_type_test_f1": {k: round(v["f1"], 4) for k, v in out["test"]["per_type"].items()},
        "params": out["floor_params"],
        "sentences": {split: len(examples) for split, examples in data.splits.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    args, cfg = domain_task_args(__doc__)
    cased, lowered = fit(cfg, args.task, lowercase=False), fit(cfg, args.task, lowercase=True)
    emit(
        {
            **task_record(args),
            "as_written": cased,
            "lowercased": lowered,
            "test_f1_lost_to_lowercasing": round(cased["test_f1"] - lowered["test_f1"], 4),
            "per_type_lost": {
                k: round(v - lowered["per_type_test_f1"].get(k, 0.0), 4) for k, v in cased["per_type_test_f1"].items()
            },
        },
        f"floor-casing-{cfg.name}-{args.task}",
    )


if __name__ == "__main__":
    main()
