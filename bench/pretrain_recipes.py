"""The contenders of bench/pretrain.py, each run once per child process.

- ``hf-line-by-line``: the Hugging Face ``run_mlm.py`` example with ``--line_by_line --pad_to_max_length``:
  every document is one example, truncated and padded to ``seq_len``; Trainer + DataCollatorForLanguageModeling.
- ``hf-group-texts`` (the reference) and ``hf-group-texts-bf16``: the example's default recipe, documents
  tokenized and concatenated into ``seq_len`` blocks by ``group_texts``; the second adds ``--bf16``.
- ``domainbert`` and ``domainbert-bf16``: ``domainbert.pretrain.stage.pretrain_arm`` (the ``continued`` arm)
  with the same model, data, batch, length, optimizer settings and step count, read back from summary.json.

Every runner returns the same record: real (non-padding) tokens fed, positions fed, steps, the timed
training wall, the loss per step against cumulative real tokens, and load/tokenisation times reported apart.
This module measures; bench/pretrain.py orchestrates, aggregates and plots.
"""

from __future__ import annotations

import json
import shutil
import time
from itertools import chain
from pathlib import Path
from typing import Any

HF_CONTENDERS = {
    "hf-line-by-line": ("line_by_line", False),
    "hf-group-texts": ("group_texts", False),
    "hf-group-texts-bf16": ("group_texts", True),
}
DOMAINBERT_CONTENDERS = {"domainbert": "fp32", "domainbert-bf16": "bf16"}
CONTENDERS = [*HF_CONTENDERS, *DOMAINBERT_CONTENDERS]
REFERENCE = "hf-group-texts"


def train_flops_per_token(config: Any, seq_len: int, mask_rate: float) -> float:
    """Model FLOPs of one training token of a BERT encoder with an MLM head computed where it is needed.

    6 x the multiply-accumulates per token (2 FLOPs each, forward + backward = 3 x forward): the attention
    and feed-forward projections, the attention scores and mixing over ``seq_len``, and the MLM head
    (transform + vocabulary projection) at the ``mask_rate`` share of positions that carry a label. A recipe
    that runs the head at every position does more work than this; MFU counts only the useful work.
    """
    d, ff, layers, vocab = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    per_layer = 4 * d * d + 2 * d * ff + 2 * seq_len * d
    head = mask_rate * (d * d + d * vocab)
    return 6.0 * (layers * per_layer + head)


class _Clock:
    """Wall times of the training loop, read from Trainer callbacks."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.begin: float | None = None
        self.step_ends: list[float] = []

    def now(self) -> float:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
        return time.perf_counter()


def run_hf(
    contender: str,
    texts: list[str],
    model_ref: str,
    work_dir: Path,
    steps: int,
    batch_size: int,
    seq_len: int,
    lr: float,
    seed: int,
    device: str,
    warmup_steps: int = 1,
    seconds: float | None = None,
    logging_steps: int = 1,
    torch_compile: bool = False,
) -> dict[str, Any]:
    """One run of a ``run_mlm.py`` recipe; only the Trainer's training loop is timed.

    ``steady_real_tokens_per_s`` leaves out the first ``warmup_steps`` steps; with ``seconds`` the run stops
    that long after them (``steps`` is then a cap). ``logging_steps`` is the Trainer's: a loss logged every
    step reads it back from the device every step, which ``run_mlm.py`` (500) does not. ``torch_compile`` is the
    Trainer's own flag (``run_mlm.py --torch_compile``).
    """
    from datasets import Dataset
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments, set_seed

    from domainbert.core.models import load_mlm_model, load_tokenizer

    recipe, bf16 = HF_CONTENDERS[contender]
    t0 = time.perf_counter()
    set_seed(seed)  # run_mlm.py seeds before the model is built (the new MLM head's init)
    tokenizer = load_tokenizer(model_ref)
    model = load_mlm_model(model_ref)
    model.accepts_loss_kwargs = False  # transformers 5 would otherwise rescale the loss by items in batch
    load_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    raw = Dataset.from_dict({"text": texts})
    if recipe == "line_by_line":

        def tokenize(examples):
            lines = [line for line in examples["text"] if len(line) > 0 and not line.isspace()]
            return tokenizer(
                lines, padding="max_length", truncation=True, max_length=seq_len, return_special_tokens_mask=True
            )

        train = raw.map(tokenize, batched=True, remove_columns=["text"])
    else:

        def tokenize(examples):
            return tokenizer(examples["text"], return_special_tokens_mask=True)

        def group_texts(examples):
            concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
            total = (len(concatenated["input_ids"]) // seq_len) * seq_len
            return {k: [t[i : i + seq_len] for i in range(0, total, seq_len)] for k, t in concatenated.items()}

        train = raw.map(tokenize, batched=True, remove_columns=["text"]).map(group_texts, batched=True)
    tokenize_s = time.perf_counter() - t0

    clock = _Clock(device)
    fed = {"real": 0, "positions": 0, "per_step": []}

    class Timing(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            clock.begin = clock.now()

        def on_step_end(self, args, state, control, **kwargs):
            clock.step_ends.append(clock.now())
            if seconds is not None and len(clock.step_ends) > warmup_steps:
                control.should_training_stop = clock.step_ends[-1] - clock.step_ends[warmup_steps - 1] >= seconds

    class CountingTrainer(Trainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            mask = inputs.get("attention_mask")
            # Kept on the device until training ends: int() here would wait for the GPU at every step.
            fed["per_step"].append(mask.sum() if mask is not None else inputs["input_ids"].numel())
            fed["positions"] += int(inputs["input_ids"].numel())
            return super().training_step(model, inputs, num_items_in_batch)

    work = Path(work_dir) / f"trainer-{contender}-{time.time_ns()}"
    args = TrainingArguments(
        output_dir=str(work),
        per_device_train_batch_size=batch_size,
        max_steps=steps,
        learning_rate=lr,
        logging_steps=logging_steps,
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        seed=seed,
        bf16=bf16,
        use_cpu=(device == "cpu"),
        disable_tqdm=True,
        dataloader_num_workers=0,
        torch_compile=torch_compile,
    )
    collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=0.15)
    trainer = CountingTrainer(
        model=model,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        data_collator=collator,
        callbacks=[Timing()],
    )
    trainer.train()
    shutil.rmtree(work, ignore_errors=True)
    fed["per_step"] = [int(n) for n in fed["per_step"]]
    fed["real"] = sum(fed["per_step"])

    losses = [(e["step"], e["loss"]) for e in trainer.state.log_history if "loss" in e and "step" in e]
    cumulative = list(_cumsum(fed["per_step"]))
    curve = [
        [step, cumulative[step - 1] if step - 1 < len(cumulative) else None, round(float(loss), 5)]
        for step, loss in losses
    ]
    train_s = clock.step_ends[-1] - clock.begin
    record = _record(
        contender, fed["real"], fed["positions"], len(clock.step_ends), train_s, curve, load_s, tokenize_s, device
    )
    if len(clock.step_ends) > warmup_steps:  # steady state: without the first steps' one-off costs
        steady_s = clock.step_ends[-1] - clock.step_ends[warmup_steps - 1]
        record["steady_real_tokens_per_s"] = round(sum(fed["per_step"][warmup_steps:]) / steady_s, 2)
        record["steady_steps"] = len(clock.step_ends) - warmup_steps
    record["flops_per_token"] = train_flops_per_token(model.config, seq_len, 0.15)
    record["documents_tokenized"] = len(texts)
    record["examples"] = len(train)
    return record


def _cumsum(values: list[int]):
    total = 0
    for v in values:
        total += v
        yield total


def _record(
    contender: str,
    real: int,
    positions: int,
    steps: int,
    train_s: float,
    curve: list,
    load_s: float,
    tokenize_s: float,
    device: str,
) -> dict[str, Any]:
    return {
        "contender": contender,
        "device": device,
        "steps": steps,
        "real_tokens": real,
        "positions": positions,
        "padding_fraction": round(1.0 - real / positions, 4) if positions else None,
        "train_wall_s": round(train_s, 3),
        "real_tokens_per_s": round(real / train_s, 2) if train_s > 0 else None,
        "load_s": round(load_s, 3),
        "tokenize_s": round(tokenize_s, 3),
        "loss_curve": curve,
        "first_loss": curve[0][2] if curve else None,
        "last_loss": curve[-1][2] if curve else None,
    }


def domainbert_overrides(
    precision: str, model_ref: str, steps: int, batch_size: int, seq_len: int, lr: float, seed: int
) -> list[str]:
    """Overrides that match domainbert's run to the Trainer recipes (run_mlm.py's defaults).

    Keys the pretrain config does not have (yet) are left out rather than failing the run.
    """
    from domainbert.config.pretrain import PretrainConfig

    fields = PretrainConfig.model_fields
    wanted = {
        "arms": "[continued]",
        "max_steps": steps,
        "budget_tokens": steps * batch_size * seq_len,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "grad_accum": 1,
        "precision": precision,
        "lr": lr,
        "warmup_ratio": 0,
        "weight_decay": 0.0,
        "adam_betas": "[0.9, 0.999]",
        "adam_eps": 1e-8,
        "max_grad_norm": 1.0,
        "mask_rate": 0.15,
        "whole_word_mask": "false",
        "log_every": 1,
        "checkpoint_every": steps + 1,
        "eval_documents": 8,
        "general_eval_corpus": "[]",
        "seed": seed,
        "seq_len_schedule": "[]",
        "packing": "true",
        # The recipes start from the checkpoint as it is (a new MLM head on the MiniLM): so does domainbert here,
        # and the timing does not wait on a general warm-up of the base.
        "base_warmup": "{enabled: 'off'}",
    }
    out = [f"pretrain.{k}={v}" for k, v in wanted.items() if k in fields]
    out.append(f"base_model.name_or_path={model_ref}")
    return out


def fresh_layout(corpus_dir: Path, run_dir: Path) -> Any:
    """A new, empty run folder (a ``RunLayout``) whose corpus is ``corpus_dir`` (a symlink).

    Never resumed or skipped: every repeat trains from the start.
    """
    from domainbert.core.paths import RunLayout

    shutil.rmtree(run_dir, ignore_errors=True)
    layout = RunLayout(run_dir)
    layout.root.mkdir(parents=True)
    layout.corpus.symlink_to(corpus_dir.resolve(), target_is_directory=True)
    return layout


def _stored_tokenize_s(model_ref: str, corpus_dir: Path) -> float | None:
    """Seconds domainbert took to tokenize the training split into its stored token ids (pretrain/token_store.py),
    once per corpus and tokenizer: the first run with them pays it, the repeats after it read the store."""
    from domainbert.core.models import load_tokenizer
    from domainbert.pretrain.token_store import cache_folder, store_fingerprint

    fp = store_fingerprint(load_tokenizer(model_ref), Path(corpus_dir), "train")
    index = cache_folder(fp) / "index.json" if fp else None
    return json.loads(index.read_text())["build_seconds"] if index is not None and index.is_file() else None


def run_domainbert(
    contender: str,
    corpus_dir: Path,
    run_dir: Path,
    model_ref: str,
    steps: int,
    batch_size: int,
    seq_len: int,
    lr: float,
    seed: int,
    device: str,
) -> dict[str, Any]:
    """One ``pretrain_arm`` run in a fresh run folder whose corpus is the benchmark's (a symlink)."""
    from domainbert.config.domain import load_domain
    from domainbert.pretrain.stage import pretrain_arm

    overrides = domainbert_overrides(DOMAINBERT_CONTENDERS[contender], model_ref, steps, batch_size, seq_len, lr, seed)
    cfg = load_domain("science", overrides)
    layout = fresh_layout(corpus_dir, run_dir)
    t0 = time.perf_counter()
    summary = pretrain_arm(cfg, "continued", layout)
    call_s = time.perf_counter() - t0
    summary_path = layout.pretrain("continued") / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
    steps_done = int(summary.get("steps") or 0)
    real = int(summary.get("tokens_consumed") or 0)
    fraction = summary.get("real_token_fraction") or 1.0
    positions = int(round(real / fraction)) if fraction else real
    per_step = real / steps_done if steps_done else 0
    curve = [[int(s), int(round(s * per_step)), round(float(loss), 5)] for s, loss in summary.get("loss_curve", [])]
    rate = summary.get("real_tokens_per_s")
    train_s = real / rate if rate else float(summary.get("wall_seconds") or call_s)
    record = _record(contender, real, positions, steps_done, train_s, curve, 0.0, 0.0, device)
    record["real_tokens_per_s"] = round(float(rate), 2) if rate else record["real_tokens_per_s"]
    record["pretrain_arm_call_s"] = round(call_s, 3)
    record["load_s"] = None  # inside pretrain_arm; see pretrain_arm_call_s and the summary's timings
    record["tokenize_s"] = _stored_tokenize_s(model_ref, corpus_dir)  # once, before the loop: not in its rate
    record["summary"] = {k: v for k, v in summary.items() if k != "loss_curve"}
    record["overrides"] = overrides
    record["flops_per_token"] = summary.get("flops_per_token")
    return record
