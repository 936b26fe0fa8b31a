"""A small fine-tuning loop: dynamic padding, length-grouped batches, early stopping on validation.

Why our own loop rather than ``transformers.Trainer``: on CPU the per-step overhead of the Trainer (callbacks,
accelerate wrapping, metric gathering) is a visible share of a tiny model's step, and we need exact control of
the data order. What it does:

- Batches and padding: length-grouped batches, the same for every model for a given seed, each padded to its
  own longest sequence (``batching.py``).
- Optimisation: AdamW (fused kernel where torch has one; no decay on biases and LayerNorm weights), linear warmup then linear decay, gradient
  clipping. In frozen (feature-based) mode only the task head trains; the encoder stays in eval mode.
- Early stopping: validation is scored ``evals_per_epoch`` times per epoch; the best weights (by the task's
  primary metric) are kept in memory and restored at the end; training stops after ``patience`` evaluations
  without improvement, but never before ``min_steps`` updates (Lightning's ``min_steps``, Keras'
  ``start_from_epoch``): a run whose epochs give fewer updates trains more epochs, its schedule stretched to
  them. Validation starts at epoch ``eval_delay`` (transformers' ``eval_delay``): the epochs before it are
  neither scored nor kept, and the schedule's last step is scored in any case. The test split is never seen here.
- A stopping step chosen elsewhere (``stop_step``: the reference's kept step, ``finetune.early_stopping:
  reference``): the run trains to it on the schedule of its whole ``epochs`` (the steps the reference took
  to it) and validates once, there; those are the weights it keeps.

- Device and precision: ``resolve_device`` picks the GPU when there is one (``finetune.device: auto``) and the
  loop runs the forward pass under ``torch.autocast`` in bf16 or fp16 (``finetune.precision``; fp16 with a
  gradient scaler). On the CPU in fp32 (the offline default and the tested path) nothing changes.

- Several processes (``finetune.num_processes``, started by torchrun): DistributedDataParallel, each rank
  on its slice of every batch, rank 0 evaluating for all (``parallel.py``). A lone process (the default) takes
  none of those paths.

- Host-device syncs: a step reads nothing from the device; ``fit_state.FitState.read`` brings its losses to the
  host where the loop logs. With several processes each step still reads once: ``parallel.agree_step``
  all-reduces the loss with the stop flag, and every rank must know the flag before its next step.

It leaves out gradient accumulation and several machines (parallel runs are separate processes,
``domainbert run --workers``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from domainbert.config.finetune import first_validated_step
from domainbert.core import signals
from domainbert.core.distributed import dist_info, resolve_device
from domainbert.core.errors import ModelError
from domainbert.core.optim import adamw, clipped_step, linear_warmup_decay, param_groups
from domainbert.core.progress import ProgressLine, current_tag, duration
from domainbert.finetune.batching import collate, length_grouped_batches, to_device
from domainbert.finetune.class_weights import weighted_loss
from domainbert.finetune.fit_state import FitState
from domainbert.finetune.parallel import agree_step, broadcast, rank_share, wrap
from domainbert.finetune.pooling import head_pooler

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel

    from domainbert.finetune.pooling import MeanPoolClassifier

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainSettings:
    epochs: float
    lr: float
    batch_size: int
    eval_batch_size: int = 64
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    patience: int = 2
    evals_per_epoch: int = 1
    length_group_size: int = 50
    seed: int = 1
    frozen: bool = False
    device: str = "cpu"
    precision: str = "fp32"
    class_weights: tuple[float, ...] | None = None  # per label, for the loss (``balanced_weights``); None: alike
    stop_step: int | None = None  # train to this step of the schedule, validate there only; None: early stopping
    min_steps: int = 0  # the fewest updates a run takes: the schedule stretches to them, no early stop before
    eval_delay: float = 0.0  # the first epoch validated (earlier ones are not); the schedule's last step always is
    eval_inference_mode: bool = True  # predictions under torch.inference_mode (off: torch.no_grad)
    eval_length_sorted: bool = True  # predictions batched by sorted length (off: in input order)

    def total_steps(self, steps_per_epoch: int) -> int:
        """The schedule's length in updates: ``epochs`` of ``steps_per_epoch``, at least ``min_steps``."""
        return max(1, math.ceil(self.epochs * steps_per_epoch), self.min_steps)


@dataclass
class Optimisation:
    """The model as trained (DDP-wrapped with several processes), its optimizer, schedule and scaler."""

    net: Any
    params: list[torch.nn.Parameter]
    opt: torch.optim.Optimizer
    sched: Any
    scaler: torch.amp.GradScaler | None
    dev: torch.device
    dtype: torch.dtype | None

    def step(
        self, batch: dict[str, torch.Tensor], weight: float, world: int, step: int, s: TrainSettings
    ) -> torch.Tensor | float:
        """Forward, backward, clip, optimizer and schedule step ``step`` (counted from 0); returns the loss
        (the whole batch's, over ranks): detached and unread in one process, read by the agreement with several."""
        with torch.autocast(self.dev.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            if s.class_weights is None:
                loss = self.net(**batch).loss
            else:
                loss = weighted_loss(self.net, batch, s.class_weights)
        value: torch.Tensor | float = loss.detach()
        if world > 1:
            loss, value = agree_step(loss, weight, world, f"at fine-tuning step {step}")
            if not math.isfinite(value):  # the read is made: fail before this step's update
                raise ModelError(
                    f"fine-tuning loss is {value} at step {step + 1}: the model's weights are "
                    "damaged or the learning rate is too high; no result was written"
                )
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        clipped_step(self.opt, self.sched, self.params, s.max_grad_norm, self.scaler)
        return value


def _set_up(model: PreTrainedModel | MeanPoolClassifier, s: TrainSettings, total: int, world: int) -> Optimisation:
    dev, dtype = resolve_device(s.device, s.precision)
    model.to(dev)  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to, hiding its signature
    if s.frozen:
        for p in model.base_model.parameters():
            p.requires_grad_(False)
        for p in fresh_head_in_encoder(model):
            p.requires_grad_(True)
    net = wrap(model, dev) if world > 1 else model  # after freezing: DDP syncs only what trains
    opt = adamw(param_groups(model, s.weight_decay), lr=s.lr)
    return Optimisation(
        net=net,
        params=[p for p in model.parameters() if p.requires_grad],
        opt=opt,
        sched=linear_warmup_decay(opt, int(s.warmup_ratio * total), total),
        scaler=torch.amp.GradScaler("cuda") if dtype == torch.float16 else None,
        dev=dev,
        dtype=dtype,
    )


def fresh_head_in_encoder(model: PreTrainedModel | MeanPoolClassifier) -> list[nn.Parameter]:
    """The parameters a frozen run trains although they sit in the encoder: the stock sequence classifier's
    pooler (``pooling.head_pooler``), initialised anew for every run (``runner.fresh_pooler``), is part of its
    head; frozen at random it would feed the classifier a fixed random projection of [CLS]."""
    pooler = head_pooler(model)
    return [] if pooler is None else list(pooler.parameters())


def _log_start(examples: int, state: FitState, s: TrainSettings) -> None:
    logger.info(
        "training %d examples, %d steps (%.3g epochs of %d), batch %d, lr %g%s%s",
        examples,
        state.total,
        state.total / state.steps_per_epoch if s.min_steps else s.epochs,
        state.steps_per_epoch,
        s.batch_size,
        s.lr,
        ", frozen encoder" if s.frozen else "",
        "" if s.stop_step is None else f", to step {s.stop_step} (the reference's kept step)",
    )


def _log_progress(state: FitState, lines: ProgressLine) -> None:
    step, total = state.step, state.end or state.total
    logger.info(
        "step %d/%d loss %.4f (%.1f examples/s, ETA %s)",
        step,
        total,
        np.mean(state.losses[-20:]),
        state.seen / state.train_seconds,
        duration(lines.eta_s(step)),
        extra={"progress": (step, total, current_tag() or "fine-tuning")},
    )


def _evaluate(
    state: FitState,
    evaluate: Callable[[], dict[str, Any]],
    primary: str,
    model: PreTrainedModel | MeanPoolClassifier,
    patience: int,
    rank: int,
    world: int,
    min_steps: int = 0,
) -> None:
    """Score validation (rank 0; the others take its metrics), keep the best weights, decide early stopping."""
    metrics = evaluate() if rank == 0 else {}
    if world > 1:
        metrics = broadcast(metrics)  # every rank takes rank 0's decision
    entry = state.add_evaluation(metrics, primary, model, patience, min_steps)
    assert state.best is not None
    logger.info(
        "step %d/%d epoch %.2f loss %.4f validation %s %.4f (best %.4f at step %d)",
        state.step,
        state.total,
        entry["epoch"],
        entry["loss"],
        primary,
        metrics[primary],
        state.best[primary],
        state.best_step,
    )
    if state.stopped_early:
        logger.info("early stopping: no improvement in %d evaluations", state.bad)


def _train_step(
    run: Optimisation,
    model: PreTrainedModel | MeanPoolClassifier,
    train: list[dict[str, Any]],
    batch_idx: list[int],
    state: FitState,
    s: TrainSettings,
    pad_id: int,
    rank: int,
    world: int,
) -> None:
    """One optimisation step on the examples ``batch_idx`` (this rank's share of them with several processes),
    counted in ``state`` with its loss left unread."""
    if world == 1:  # SIGTERM/SIGUSR1: stop here, nothing is written (several ranks: agree_step)
        signals.check(f"at fine-tuning step {state.step}")
    t0, c0 = time.perf_counter(), time.process_time()
    run.net.train()
    if s.frozen:
        model.base_model.eval()
    mine, weight = rank_share(batch_idx, train, rank, world) if world > 1 else (batch_idx, 1.0)
    value = run.step(to_device(collate([train[i] for i in mine], pad_id), run.dev), weight, world, state.step, s)
    state.add_loss(value, len(batch_idx), time.perf_counter() - t0, time.process_time() - c0)


def fit(
    model: PreTrainedModel | MeanPoolClassifier,
    train: list[dict[str, Any]],
    lengths: list[int],
    evaluate: Callable[[], dict[str, Any]],
    primary: str,
    s: TrainSettings,
    pad_id: int,
) -> dict[str, Any]:
    """Train ``model`` in place with early stopping; leave it holding the best validation weights.

    Args:
        model: a Hugging Face model whose forward takes ``labels`` and returns ``loss``.
        train: encoded training features (``encoding`` modules of this package).
        lengths: a tokenizer-independent length per training example (for length grouping).
        evaluate: scores the current model on validation (returns a metrics dict); with several processes
            only rank 0 calls it and the others take its metrics.
        primary: the key of the metric early stopping maximises.
        s: the settings.
        pad_id: the tokenizer's padding id.

    Returns:
        ``history`` (per evaluation: step, epoch, loss, metrics), ``best`` (validation metrics of the kept
        weights), ``best_step``, ``steps``, ``stopped_early``, ``train_seconds`` (optimisation only, evaluation
        excluded), ``loss_start``/``loss_end`` (mean training loss of the first and last tenth of the steps),
        ``train_cpu_seconds`` (the same steps in CPU time, all threads), ``train_examples`` (examples processed)
        and ``examples_per_s``.
    """
    rank, world = dist_info()
    steps_per_epoch = math.ceil(len(train) / s.batch_size)
    state = FitState(total=s.total_steps(steps_per_epoch), steps_per_epoch=steps_per_epoch)
    run = _set_up(model, s, state.total, world)
    rng = np.random.default_rng(s.seed)  # the same batches on every rank
    torch.manual_seed(s.seed + rank)  # each rank its own dropout masks
    eval_every = max(1, steps_per_epoch // s.evals_per_epoch)
    first_eval = first_validated_step(s.eval_delay, steps_per_epoch)  # eval_delay 3: the third epoch's last step
    end = state.total if s.stop_step is None else max(1, min(s.stop_step, state.total))  # the schedule is total's
    state.end = end
    _log_start(len(train), state, s)
    lines = ProgressLine(end)  # a line every tenth of the run, and at least every 30 s (progress.py)
    while state.step < end and not state.stopped:
        for batch_idx in length_grouped_batches(lengths, s.batch_size, s.length_group_size, rng):
            _train_step(run, model, train, batch_idx, state, s, pad_id, rank, world)
            step = state.step
            progress = lines.due(step) or step % state.window == 0
            if s.stop_step is not None:
                evaluating = step == end
            else:
                evaluating = step % eval_every == 0 and step >= first_eval or step == end
            if progress or evaluating:
                state.read()  # the only read of the device: where the loop logs
            if progress:
                _log_progress(state, lines)
            if evaluating:
                _evaluate(state, evaluate, primary, model, s.patience, rank, world, s.min_steps)
            if step >= end or state.stopped:
                break
    state.read()  # a stop between logging steps leaves losses unread
    if state.best_state is not None:
        model.load_state_dict(state.best_state)
    return state.result()
