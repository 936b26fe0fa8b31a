"""The measurements of bench/gpu_check.py, each run in a child process from a spec (a JSON dict).

- ``loader``: real tokens/s of packed, masked batches (``pretrain.data.TokenStream`` + ``masking.apply_mask``,
  the trainer's own calls) at the given batch shapes, for a fixed wall time per shape, no model; read from the
  split's stored token ids (``pretrain.token_store``: the figure; tokenizing the split once is timed apart),
  and tokenized in the calling thread and on the read-ahead threads a GPU run gets (``pretrain.read_ahead``).
- ``pretrain``: the pipeline's own trainer: ``setup.set_up`` builds the ``continued`` arm (engine, stream,
  masking) from the science domain with bench/pretrain_recipes' overrides, then ``trainer.train_step`` runs
  warm-up steps and a timed window. The host time spent building batches (``next_sequences`` and
  ``apply_mask``) is clocked apart: the share of each step the device waits for data, since every step reads
  its loss back. DeepSpeed and torchrun runs are this measurement with other overrides or under the launcher.
- ``hf``: ``run_mlm.py``'s group_texts recipe (pretrain_recipes.run_hf) for the same wall time after warm-up.
- ``finetune``: NER fine-tuning, ours (``finetune.runner.run_finetune``) and the Trainer recipe
  (bench/finetune.trainer_recipe), examples/s of each, after an untimed short run that warms the device.

Every record carries ``real_tokens_per_s`` (or examples/s), the FLOPs per token for MFU
(pretrain_recipes.train_flops_per_token: the useful work, the same formula for every configuration), and peak
memory (the GPU allocator's peak on CUDA, the process's peak RSS on the CPU). Checkpoints, evaluation and
the arm's outputs are left out: only training steps are timed.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from common import peak_rss_mib
from pretrain import loss_fell
from pretrain_recipes import domainbert_overrides, fresh_layout, run_hf, train_flops_per_token

HF_RECIPE = "hf-group-texts-bf16"


def _sync(device: Any) -> None:
    import torch

    if getattr(device, "type", device) == "cuda":
        torch.cuda.synchronize()


def _peak_memory_mib(device: Any) -> float:
    import torch

    if getattr(device, "type", device) == "cuda":
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return peak_rss_mib()


def _device_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "world_size": os.environ.get("WORLD_SIZE"),
        "launched_by_torchrun": "TORCHELASTIC_RUN_ID" in os.environ,
    }
    if torch.cuda.is_available():
        facts["device_name"] = torch.cuda.get_device_name()
    return facts


def measure_loader(spec: dict[str, Any]) -> dict[str, Any]:
    """Packed, masked batches per second at each (batch, length) of ``spec["shapes"]``: from the split's stored
    token ids (``pretrain.token_store``, what every run reads since they exist; the split tokenized once first,
    timed apart as ``tokenize_once``), and tokenizing as the text stream does, in the training thread (a CPU
    run) and on the read-ahead threads a GPU run gets (``read_ahead.default_workers``)."""
    import shutil

    import torch

    from domainbert.core.models import load_tokenizer
    from domainbert.pretrain.data import TokenStream
    from domainbert.pretrain.masking import MaskingSpec, apply_mask, step_generator
    from domainbert.pretrain.read_ahead import default_workers
    from domainbert.pretrain.token_store import StoredCursor, StoredReader, TokenStore, build

    tokenizer = load_tokenizer(spec["model_ref"])
    masking = MaskingSpec(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    corpus = Path(spec["corpus_dir"])
    folder = Path(spec["run_dir"]) / "token-ids"  # a fresh store each run: the one-off cost is measured
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    out: dict[str, Any] = {"kind": "loader", "tokenize_once": build(tokenizer, corpus, "train", folder)}
    token_store = TokenStore(folder)

    def stream(workers: int | None) -> TokenStream:
        if workers is None:
            blocks = StoredReader(StoredCursor(token_store, corpus, "train", spec["seed"]))
            return TokenStream(tokenizer, corpus, "train", shuffle_seed=spec["seed"], blocks=blocks)
        return TokenStream(tokenizer, corpus, "train", shuffle_seed=spec["seed"], encode_workers=workers)

    for label, workers in (("stored", None), ("one_thread", 0), ("read_ahead", default_workers(torch.device("cuda")))):
        shapes, total_real, total_s = {}, 0, 0.0
        for batch_size, seq_len in spec["shapes"]:
            source = stream(workers)
            source.next_sequences(batch_size, seq_len)  # opens the first shard, starts the threads
            real, step, start = 0, 0, time.perf_counter()
            while time.perf_counter() - start < spec["seconds"] or step == 0:
                batch = source.next_sequences(batch_size, seq_len)
                apply_mask(
                    batch.input_ids, batch.special, batch.word_start, masking, step_generator(spec["seed"], step)
                )
                real, step = real + batch.real_tokens, step + 1
            elapsed = time.perf_counter() - start
            source._reader.close()
            shapes[f"{batch_size}x{seq_len}"] = {
                "real_tokens_per_s": round(real / elapsed, 1),
                "batches": step,
                "seconds": round(elapsed, 3),
            }
            total_real, total_s = total_real + real, total_s + elapsed
        out[label] = {"encode_workers": workers, "real_tokens_per_s": round(total_real / total_s, 1), "shapes": shapes}
    out["loader_real_tokens_per_s"] = out["stored"]["real_tokens_per_s"]
    out.update(
        tokenizers_parallelism=os.environ.get("TOKENIZERS_PARALLELISM", "unset (on)"),
        cpu_count=os.cpu_count(),
        load_average=[round(x, 2) for x in os.getloadavg()],
        peak_memory_mib=peak_rss_mib(),
    )
    return out


class _DataClock:
    """Host seconds spent building batches inside ``train_step``: the stream's ``next_sequences`` and the
    trainer's ``apply_mask``, wrapped for the length of the run."""

    def __init__(self, setup: Any) -> None:
        from domainbert.pretrain import trainer

        self.seconds = 0.0
        setup.stream.next_sequences = self._timed(setup.stream.next_sequences)
        trainer.apply_mask = self._timed(trainer.apply_mask)

    def _timed(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        return timed


def measure_pretrain(spec: dict[str, Any]) -> dict[str, Any]:
    """The pipeline's trainer on ``spec["model_ref"]``: warm-up steps, then steps for ``spec["seconds"]``."""
    import torch

    from domainbert.config.domain import load_domain
    from domainbert.pretrain.log_window import LogWindow
    from domainbert.pretrain.runtime import torch_threads
    from domainbert.pretrain.setup import set_up
    from domainbert.pretrain.trainer import TrainState, train_step

    overrides = domainbert_overrides(
        "bf16", spec["model_ref"], 1_000_000, spec["batch_size"], spec["seq_len"], spec["lr"], spec["seed"]
    ) + spec.get("overrides", [])
    cfg = load_domain("science", overrides)
    layout = fresh_layout(Path(spec["corpus_dir"]), Path(spec["run_dir"]))
    with torch_threads(cfg.pretrain.torch_threads):
        t0 = time.perf_counter()
        setup = set_up(cfg, "continued", layout)
        setup_s = time.perf_counter() - t0
        clock, state, window = _DataClock(setup), TrainState(fingerprint="gpu-check"), LogWindow()
        phase = setup.plan.phase_at(0)
        setup.engine.module.train()
        for _ in range(spec["warmup_steps"]):
            train_step(setup, state, phase, window)
        _sync(setup.device)
        if setup.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        steps, real0, data0, start = 0, state.real_tokens, clock.seconds, time.perf_counter()
        while time.perf_counter() - start < spec["seconds"] or steps == 0:
            train_step(setup, state, phase, window)  # reads nothing from the device, as in the trainer's loop
            steps += 1
        _sync(setup.device)
        elapsed = time.perf_counter() - start
    curve = window.read()  # every step's loss, read once after the timed steps
    loss = curve[-1][1]
    real = state.real_tokens - real0
    data_s = clock.seconds - data0
    return {
        "kind": "pretrain",
        "real_tokens_per_s": round(real / elapsed, 1),
        "steps": steps,
        "timed_seconds": round(elapsed, 3),
        "warmup_steps": spec["warmup_steps"],
        "setup_seconds": round(setup_s, 2),
        "data_wait_share": round(data_s / elapsed, 4),
        "data_seconds_per_step": round(data_s / steps, 5),
        "step_seconds": round(elapsed / steps, 5),
        "first_loss": round(curve[0][1], 4),
        "last_loss": round(loss, 4),
        **loss_fell([(step, None, value) for step, value in curve]),  # warm-up steps included
        "flops_per_token": train_flops_per_token(setup.model.config, spec["seq_len"], cfg.pretrain.mask_rate),
        "pipeline_flops_per_token": setup.flops_per_token,
        "peak_memory_mib": _peak_memory_mib(setup.device),
        "engine": type(setup.engine).__name__,
        "attention": setup.attention,
        "world_size": setup.world,
        "batch_size": spec["batch_size"],
        "seq_len": spec["seq_len"],
        "overrides": spec.get("overrides", []),
        **_device_facts(),
    }


def measure_hf(spec: dict[str, Any]) -> dict[str, Any]:
    """``run_mlm.py``'s group_texts recipe in bf16 through the Trainer, steady rate after warm-up."""
    import torch

    from domainbert.corpus.store import iter_texts

    texts = list(iter_texts(Path(spec["corpus_dir"]), "train"))[: spec.get("max_documents")]
    record = run_hf(
        HF_RECIPE,
        texts,
        spec["model_ref"],
        Path(spec["run_dir"]),
        1_000_000,
        spec["batch_size"],
        spec["seq_len"],
        spec["lr"],
        spec["seed"],
        spec["device"],
        warmup_steps=spec["warmup_steps"],
        seconds=spec["seconds"],
        logging_steps=500,
        torch_compile=spec.get("compile", False),
    )
    device = torch.device(spec["device"])
    return {
        "kind": "hf",
        "torch_compile": spec.get("compile", False),
        "real_tokens_per_s": record.get("steady_real_tokens_per_s"),
        "steps": record.get("steady_steps"),
        "warmup_steps": spec["warmup_steps"],
        "flops_per_token": record["flops_per_token"],
        "peak_memory_mib": _peak_memory_mib(device),
        "padding_fraction": record["padding_fraction"],
        "tokenize_seconds": record["tokenize_s"],
        "batch_size": spec["batch_size"],
        "seq_len": spec["seq_len"],
        **_device_facts(),
    }


def measure_finetune(spec: dict[str, Any]) -> dict[str, Any]:
    """NER fine-tuning of ``spec["model_ref"]``: our loop against the ``run_ner.py`` Trainer recipe."""
    from domainbert.finetune.floors import run_floor
    from domainbert.finetune.runner import run_finetune
    from domainbert.finetune.trainer import TrainSettings
    from finetune import load_task_data, trainer_recipe

    data, _ = load_task_data("science", spec["task"], spec["train_examples"], spec["eval_examples"])
    settings = TrainSettings(
        epochs=spec["epochs"],
        lr=spec["lr"],
        batch_size=spec["batch_size"],
        seed=spec["seed"],
        evals_per_epoch=1,
        patience=100,
        device=spec["device"],
        precision="bf16" if spec["device"] == "cuda" else "fp32",
    )
    # Untimed, first: a short run of the same model pays the device's first-use costs (context, library handles,
    # kernel choices), which would otherwise land on whichever side runs first (ours, 0.44x the Trainer on an
    # H200 with them: bench/results/gpu_check_h200_2026-12.md).
    warm_up, _ = load_task_data("science", spec["task"], 64, 16)
    run_finetune(warm_up, spec["model_ref"], dataclasses.replace(settings, epochs=1), spec["max_length"])
    ours = run_finetune(data, spec["model_ref"], settings, spec["max_length"])
    base = trainer_recipe(
        data,
        spec["model_ref"],
        spec["batch_size"],
        spec["lr"],
        spec["epochs"],
        spec["seed"],
        spec["max_length"],
        device=spec["device"],
        bf16=spec["device"] == "cuda",
    )
    return {
        "kind": "finetune",
        "task": spec["task"],
        "examples_per_s": round(ours["examples_per_s"], 2),
        "trainer_examples_per_s": round(base["examples_per_s"], 2),
        "ratio_vs_trainer": round(ours["examples_per_s"] / base["examples_per_s"], 3),
        "test_f1": ours["test"]["f1"],
        "trainer_test_f1": base["test_f1"],
        # a ratio between models that learned nothing says nothing: both must beat the task's floor (the CRF)
        **_learned(ours["test"]["f1"], base["test_f1"], run_floor(data)["test"]["f1"]),
        "train_examples": ours["train_examples"],
        "epochs": spec["epochs"],
        "max_length": spec["max_length"],
        "batch_size": spec["batch_size"],
        "precision": settings.precision,
        **_device_facts(),
    }


def _learned(ours: float, trainer: float, floor: float) -> dict[str, Any]:
    return {"floor_test_f1": floor, "learned": {"ours": ours > floor, "trainer": trainer > floor}}


MEASURES = {"loader": measure_loader, "pretrain": measure_pretrain, "hf": measure_hf, "finetune": measure_finetune}
